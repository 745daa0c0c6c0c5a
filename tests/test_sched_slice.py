"""The loop thread asks Linux for a short slice (``scheduling.loop_slice_us``), and only it: the store writer
keeps the slice the process started with, ``null`` leaves the loop at it too, and an app run in process gives
its thread back as it found it."""

from __future__ import annotations

import asyncio
import os
import threading
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any, TypeVar

import pytest

from gateway.sched_slice import current_slice_us, request_slice
from tests.procs import GatewayHandle, SimHandle, run_gateway, sim_models

T = TypeVar("T")


def _in_a_thread(work: Callable[[], T]) -> T:
    """``work``'s result, run on a thread of its own (a slice belongs to the thread that asked for it)."""
    out: list[T] = []
    thread = threading.Thread(target=lambda: out.append(work()))
    thread.start()
    thread.join(10)
    return out[0]


def _honoured() -> bool:
    return _in_a_thread(lambda: request_slice(300) and current_slice_us() == 300.0)


pytestmark = pytest.mark.skipif(
    current_slice_us() is None or not _honoured(), reason="a kernel without custom slices (Linux < 6.12) or not Linux"
)
#: What a gateway's threads start with in these tests: not the loop's 100, so the two can be told apart.
INHERITED_US = 3000.0


def test_a_thread_gets_the_slice_it_asks_for_clamped_to_linuxs_range_and_others_keep_theirs() -> None:
    before = current_slice_us()
    assert _in_a_thread(lambda: (request_slice(250), current_slice_us())) == (True, 250.0)
    assert _in_a_thread(lambda: (request_slice(5), current_slice_us())) == (True, 100.0)  # Linux's least
    assert current_slice_us() == before  # this thread asked for nothing


def test_a_thread_under_another_policy_than_the_default_is_left_as_it_is() -> None:
    def batch() -> tuple[bool, float | None, float | None]:
        inherited = current_slice_us()
        os.sched_setscheduler(threading.get_native_id(), os.SCHED_BATCH, os.sched_param(0))
        return request_slice(100), current_slice_us(), inherited

    asked, after, inherited = _in_a_thread(batch)
    assert not asked and after == inherited


def test_an_app_run_in_process_gives_its_thread_back_as_it_found_it(sim: SimHandle) -> None:
    """The lifespan asks on the thread it runs on; a test or an embedding running the app gets it back after."""
    from gateway.api.app import create_app
    from gateway.config import parse_settings

    app = create_app(parse_settings({"models": sim_models(sim.base_url)}))

    async def serve_once() -> tuple[float | None, float | None]:
        async with app.router.lifespan_context(app):
            during = current_slice_us()
        return during, current_slice_us()

    def run() -> tuple[float | None, float | None, float | None]:
        request_slice(INHERITED_US)
        return (*asyncio.run(serve_once()), INHERITED_US)

    during, after, before = _in_a_thread(run)
    assert during == 100.0 and after == before


@contextmanager
def _served(sim: SimHandle, tmp_path: Path, extra: dict[str, Any]) -> Iterator[GatewayHandle]:
    """A gateway started from a thread whose slice is ``INHERITED_US``: its threads inherit that."""
    stack = ExitStack()

    def start() -> GatewayHandle:
        request_slice(INHERITED_US)
        return stack.enter_context(run_gateway(tmp_path, {"models": sim_models(sim.base_url), **extra}))

    with stack:
        yield _in_a_thread(start)


def _slices(gateway: GatewayHandle) -> tuple[float | None, list[float | None]]:
    """The served gateway's loop thread (its main thread) slice, and its other threads'."""
    pid = gateway.proc.pid
    others = [int(t) for t in os.listdir(f"/proc/{pid}/task") if int(t) != pid]
    return current_slice_us(pid), [current_slice_us(t) for t in others]


def test_a_served_gateways_loop_runs_with_the_short_slice_and_its_writer_with_the_one_it_started_with(
    sim: SimHandle, tmp_path: Path
) -> None:
    with _served(sim, tmp_path, {}) as gateway:
        loop, others = _slices(gateway)
    assert loop == 100.0
    assert INHERITED_US in others, "the store writer, started before the loop asked, keeps its slice"


def test_null_leaves_the_loop_at_the_slice_it_started_with(sim: SimHandle, tmp_path: Path) -> None:
    with _served(sim, tmp_path, {"scheduling": {"loop_slice_us": None}}) as gateway:
        loop, others = _slices(gateway)
    assert loop == INHERITED_US and others
