"""The bookkeeping after an answer gives way to the client first when the loop holds the short slice.

With the short slice (``scheduling.loop_slice_us``) the loop's deadline is early, so a client woken on its core
by the answer waited while the loop counted, measured and recorded the request (RESULTS, session 57). The
app is driven through ASGI in its own thread (the slice is the thread's, and the lifespan gives it back), the
provider simulator is a real process; ``give_way`` and the recorder write into the same list as the
server's ``send``, so the order of the three is what the test reads.
"""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import orjson
import pytest

import gateway.api.answer as answer_module
from gateway.api.app import create_app
from gateway.config import parse_settings
from gateway.sched_slice import current_slice_us, request_slice
from gateway.store.record import MemoryRecorder, RequestRecord
from tests.inproc import body_once, post_scope
from tests.procs import SimHandle, sim_models


def _slices_honoured() -> bool:
    out: list[bool] = []
    thread = threading.Thread(target=lambda: out.append(request_slice(300) and current_slice_us() == 300.0))
    thread.start()
    thread.join(10)
    return bool(out and out[0])


class _Recorder(MemoryRecorder):
    def __init__(self, events: list[str]) -> None:
        super().__init__()
        self.events = events

    def record(self, record: RequestRecord) -> None:
        self.events.append("record")
        super().record(record)


async def _one(app: Any, raw: bytes, events: list[str]) -> None:
    """One request through the ASGI app, its sends named in ``events``; then a few loop turns."""
    done = asyncio.Event()

    async def send(message: dict[str, Any]) -> None:
        if message["type"] == "http.response.start":
            events.append(f"status {message['status']}")
        elif not message.get("more_body", False):
            events.append("end written")

    await app(post_scope("/v1/chat/completions", len(raw)), body_once(raw, done), send)
    done.set()
    for _ in range(20):
        await asyncio.sleep(0.01)


def _served(
    sim: SimHandle,
    extra: dict[str, Any],
    monkeypatch: pytest.MonkeyPatch,
    others: int = 0,
    faults: tuple[dict[str, Any], ...] = (),
) -> tuple[list[str], bool]:
    """The events of a plain and a streamed request, and whether the gateway could give way while serving;
    ``others``: requests counted in flight beside them (as if forwarded and waiting for their provider)."""
    events: list[str] = []
    monkeypatch.setattr(answer_module, "give_way", lambda: events.append("give way"))
    app = create_app(parse_settings({"models": sim_models(sim.base_url), **extra}), recorder=_Recorder(events))
    gives_way: list[bool] = []
    in_flight_after: list[int] = []

    async def serve() -> None:
        async with app.router.lifespan_context(app):
            gateway = app.state.gateway
            gives_way.append(gateway.gives_way)
            gateway.in_flight += others
            if faults:
                sim.faults(*faults)
            for stream in (False, True):
                messages = [{"role": "user", "content": "Say hello."}]
                raw = orjson.dumps({"model": "gpt-4o-mini", "messages": messages, "stream": stream})
                await _one(app, raw, events)
            in_flight_after.append(gateway.in_flight - others)

    thread = threading.Thread(target=lambda: asyncio.run(serve()))
    thread.start()
    thread.join(60)
    assert gives_way, "the app did not serve"
    assert in_flight_after == [0], "every request counted in flight was finished once"
    return events, gives_way[0]


@pytest.mark.skipif(not _slices_honoured(), reason="a kernel without custom slices (Linux < 6.12) or not Linux")
def test_with_the_short_slice_the_client_goes_first_and_then_the_request_is_recorded(
    sim: SimHandle, monkeypatch: pytest.MonkeyPatch
) -> None:
    events, gives_way = _served(sim, {}, monkeypatch)
    assert gives_way
    one_request = ["status 200", "end written", "give way", "record"]
    assert events == one_request + one_request  # plain, then streamed: the end is written before either


def test_without_the_short_slice_the_loop_does_not_yield(sim: SimHandle, monkeypatch: pytest.MonkeyPatch) -> None:
    events, gives_way = _served(sim, {"scheduling": {"loop_slice_us": None}}, monkeypatch)
    assert not gives_way
    assert events == ["status 200", "end written", "record"] * 2


@pytest.mark.skipif(not _slices_honoured(), reason="a kernel without custom slices (Linux < 6.12) or not Linux")
def test_with_other_requests_in_flight_the_loop_keeps_the_core_for_them(
    sim: SimHandle, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Yielding then could hand the core to a busy neighbour (a local model) while other requests wait on the loop."""
    events, gives_way = _served(sim, {}, monkeypatch, others=1)
    assert gives_way
    assert events == ["status 200", "end written", "record"] * 2


def test_a_request_the_provider_fails_is_finished_once_too(sim: SimHandle, monkeypatch: pytest.MonkeyPatch) -> None:
    """A refused plain request and a stream cut half way leave nothing counted in flight (``_served`` checks)."""
    faults = ({"kind": "status", "status": 400, "times": 1}, {"kind": "drop_stream", "times": 1})
    events, gives_way = _served(sim, {}, monkeypatch, faults=faults)
    refused = ["record", "status 400", "end written"]  # recorded before its error is answered: nothing to wait for
    cut = ["status 200", "end written", *(["give way"] if gives_way else []), "record"]  # its error event, then the end
    assert events == refused + cut
