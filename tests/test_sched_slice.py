"""The loop thread asks Linux for a short slice (``scheduling.loop_slice_us``), and only it: the store writer
keeps the kernel's default, and ``null`` leaves the loop at the default too."""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

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
DEFAULT_US = current_slice_us()


def test_a_thread_gets_the_slice_it_asks_for_clamped_to_linuxs_range_and_others_keep_theirs() -> None:
    assert _in_a_thread(lambda: (request_slice(250), current_slice_us())) == (True, 250.0)
    assert _in_a_thread(lambda: (request_slice(5), current_slice_us())) == (True, 100.0)  # Linux's least
    assert current_slice_us() == DEFAULT_US  # this thread asked for nothing


def test_a_thread_under_another_policy_than_the_default_is_left_as_it_is() -> None:
    def batch() -> tuple[bool, float | None]:
        os.sched_setscheduler(threading.get_native_id(), os.SCHED_BATCH, os.sched_param(0))
        return request_slice(100), current_slice_us()

    assert _in_a_thread(batch) == (False, DEFAULT_US)


def _slices(gateway: GatewayHandle) -> tuple[float | None, list[float | None]]:
    """The served gateway's loop thread (its main thread) slice, and its other threads'."""
    pid = gateway.proc.pid
    others = [int(t) for t in os.listdir(f"/proc/{pid}/task") if int(t) != pid]
    return current_slice_us(pid), [current_slice_us(t) for t in others]


def test_a_served_gateways_loop_runs_with_the_short_slice_and_its_writer_with_the_default(
    default_gateway: GatewayHandle,
) -> None:
    loop, others = _slices(default_gateway)
    assert loop == 100.0
    assert DEFAULT_US in others, "the store writer, started before the loop asked, keeps the kernel's slice"


def test_null_leaves_the_loop_at_the_kernels_slice(sim: SimHandle, tmp_path: Path) -> None:
    config = {"models": sim_models(sim.base_url), "scheduling": {"loop_slice_us": None}}
    with run_gateway(tmp_path, config) as gateway:
        loop, others = _slices(gateway)
    assert loop == DEFAULT_US and others
