"""Every forwarded request is recorded exactly once, however its stream ends (issue 35).

A streamed request used to be recorded in its relay generator's ``finally``, which never runs
when the generator is closed (or dropped) before its first step: a server whose ``send`` of
``http.response.start`` raises (uvicorn does for a header it refuses; other servers do when the
peer is gone) left the request forwarded, billed and never recorded, on every door, and its
upstream connection to the garbage collector. The gateway here is the real app with its real
lifespan, driven through ASGI so the test controls exactly when the client goes; the provider
is the simulator over real HTTP.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from typing import Any

import orjson
import pytest
from starlette.types import Message

from gateway.api.app import create_app
from gateway.config import parse_settings
from gateway.store.record import MemoryRecorder, RequestRecord
from tests.inproc import body_once, post_scope
from tests.procs import SimHandle, sim_models

USER = "Tell me about owners of requests, in a good many words please."
DOORS: dict[str, tuple[str, dict[str, Any]]] = {
    "chat": ("/v1/chat/completions", {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": USER}]}),
    "responses": ("/v1/responses", {"model": "gpt-4o-mini", "input": USER}),
    "messages": (
        "/v1/messages",
        {"model": "gpt-4o-mini", "max_tokens": 64, "messages": [{"role": "user", "content": USER}]},
    ),
}


async def _drive(door: str, client: Callable[[Message], bool], gone: asyncio.Event) -> list[RequestRecord]:
    """Send one streamed request through ``door``; ``client(message)`` is the server's ``send``: it
    returns False to drop the message, or raises, as a server does when the peer is gone."""
    path, body = DOORS[door]
    recorder = MemoryRecorder()
    app = create_app(parse_settings({"models": sim_models(SIM_URL[0])}), recorder=recorder)
    raw = orjson.dumps({**body, "stream": True})

    async def send(message: Message) -> None:
        client(message)

    async with app.router.lifespan_context(app):
        with contextlib.suppress(OSError):  # the server's own failure, as uvicorn would log it
            await app(post_scope(path), body_once(raw, gone), send)
        for _ in range(50):  # the record is handed over on a later loop turn
            await asyncio.sleep(0.02)
    return list(recorder.records)


SIM_URL: list[str] = [""]


@pytest.fixture(autouse=True)
def _sim_url(sim: SimHandle) -> None:
    SIM_URL[0] = sim.base_url


@pytest.mark.parametrize("door", list(DOORS))
def test_a_response_that_cannot_start_is_still_recorded_once(door: str, sim: SimHandle) -> None:
    sim.reset()

    def refuse_start(message: Message) -> bool:
        if message["type"] == "http.response.start":
            raise OSError("the peer is gone")
        return True

    records = asyncio.run(_drive(door, refuse_start, asyncio.Event()))
    assert len(sim.received()) == 1, "forwarded (and billed) once"
    assert [r.status for r in records] == [499], "recorded exactly once, as the client having gone"


@pytest.mark.parametrize("door", list(DOORS))
def test_client_gone_before_the_first_chunk_is_recorded_once(door: str, sim: SimHandle) -> None:
    sim.reset()
    sim.faults({"kind": "slow_stream", "seconds": 0.05})  # else the whole answer is relayed before the loop turns

    async def run() -> list[RequestRecord]:
        gone = asyncio.Event()

        def hang_up_at_start(message: Message) -> bool:
            if message["type"] == "http.response.start":
                gone.set()  # the listener sees the disconnect before any chunk is written
            return True

        return await _drive(door, hang_up_at_start, gone)

    records = asyncio.run(run())
    assert len(sim.received()) == 1
    assert [r.status for r in records] == [499]


@pytest.mark.parametrize("door", list(DOORS))
def test_stream_closed_after_the_first_chunk_is_recorded_once(door: str, sim: SimHandle) -> None:
    sim.reset()
    sim.faults({"kind": "slow_stream", "seconds": 0.05})

    async def run() -> list[RequestRecord]:
        gone = asyncio.Event()
        chunks = 0

        def read_one_chunk(message: Message) -> bool:
            nonlocal chunks
            if message["type"] == "http.response.body" and message.get("body"):
                chunks += 1
                if chunks == 2:
                    gone.set()
            return True

        return await _drive(door, read_one_chunk, gone)

    records = asyncio.run(run())
    assert len(sim.received()) == 1
    assert [r.status for r in records] == [499]
