"""EventStreamResponse: the stream runs to its end, and stops at once when the client hangs up."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from typing import Any

from gateway.api.event_stream import EventStreamResponse

SCOPE: dict[str, Any] = {"type": "http", "asgi": {"spec_version": "2.3"}}


async def test_every_event_is_sent_then_the_body_ends() -> None:
    sent: list[dict[str, Any]] = []

    async def events() -> AsyncIterator[bytes]:
        for i in range(3):
            yield f"data: {i}\n\n".encode()

    async def receive() -> dict[str, Any]:
        await asyncio.sleep(3600)  # the client stays
        return {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    await EventStreamResponse(events(), headers={"x-a": "1"})(SCOPE, receive, send)
    assert sent[0]["type"] == "http.response.start"
    assert dict(sent[0]["headers"])[b"content-type"].startswith(b"text/event-stream")
    assert [m.get("body") for m in sent[1:]] == [b"data: 0\n\n", b"data: 1\n\n", b"data: 2\n\n", b""]
    assert sent[-1]["more_body"] is False


async def test_a_hang_up_stops_a_stream_waiting_for_its_next_event() -> None:
    finished: list[str] = []
    hang_up = asyncio.Event()

    async def events() -> AsyncIterator[bytes]:
        try:
            yield b"data: first\n\n"
            await asyncio.sleep(3600)  # an upstream that has gone quiet
            yield b"data: never\n\n"
        finally:
            finished.append("relay closed")

    async def receive() -> dict[str, Any]:
        await hang_up.wait()
        return {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        if message.get("body") == b"data: first\n\n":
            hang_up.set()

    started = time.monotonic()
    await asyncio.wait_for(EventStreamResponse(events())(SCOPE, receive, send), timeout=5)
    assert finished == ["relay closed"]
    assert time.monotonic() - started < 1
    assert not asyncio.current_task().cancelling()  # type: ignore[union-attr]


async def test_a_cancel_that_is_not_a_hang_up_propagates() -> None:
    async def events() -> AsyncIterator[bytes]:
        await asyncio.sleep(3600)
        yield b""

    async def receive() -> dict[str, Any]:
        await asyncio.sleep(3600)
        return {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        return None

    task = asyncio.ensure_future(EventStreamResponse(events())(SCOPE, receive, send))
    await asyncio.sleep(0.05)
    task.cancel()
    try:
        await task
    except asyncio.CancelledError:
        return
    raise AssertionError("a server shutdown's cancel must not be swallowed")


async def _sent(events: AsyncIterator[bytes], last: bytes | None) -> list[dict[str, Any]]:
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        await asyncio.sleep(3600)  # the client stays
        return {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    await EventStreamResponse(events, last=last)(SCOPE, receive, send)
    return sent[1:]


async def test_the_named_last_event_goes_out_with_the_end_of_the_body_after_the_stream_has_finished() -> None:
    """One write for ``[DONE]`` and the chunked terminator: the client is woken once at the end, not twice."""
    done = b"data: [DONE]\n\n"
    order: list[str] = []

    async def events() -> AsyncIterator[bytes]:
        try:
            yield b"data: 0\n\n"
            yield done
        finally:
            order.append("stream finished")

    sent = await _sent(events(), done)
    assert [(m["body"], m["more_body"]) for m in sent] == [(b"data: 0\n\n", True), (done, False)]
    assert order == ["stream finished"]


async def test_an_event_like_the_last_that_is_followed_by_more_is_sent_as_any_other() -> None:
    done = b"data: [DONE]\n\n"

    async def events() -> AsyncIterator[bytes]:
        yield done
        yield b"data: after\n\n"

    sent = await _sent(events(), done)
    assert [(m["body"], m["more_body"]) for m in sent] == [(done, True), (b"data: after\n\n", True), (b"", False)]


async def test_a_chat_stream_ends_with_done_and_the_end_of_its_body_in_one_message(sim: Any) -> None:

    from gateway.api.app import create_app
    from gateway.config import parse_settings

    models = [{"name": "gpt-4o-mini", "litellm_model": "openai/gpt-4o-mini", "api_base": sim.base_url}]
    sent = await _send_hi(create_app(parse_settings({"models": models})))
    assert sent[0]["status"] == 200
    assert (sent[-1]["body"], sent[-1]["more_body"]) == (b"data: [DONE]\n\n", False)
    assert all(m["more_body"] for m in sent[1:-1])
    assert b"".join(m["body"] for m in sent[1:]).count(b"data: ") > 3


class _Batched:
    """An upstream stream whose payloads arrive in the batches given (as ``_SSEStream.batches`` tells them)."""

    def __init__(self, batches: list[list[bytes]]) -> None:
        self._batches = batches

    async def batches(self) -> AsyncIterator[list[bytes]]:
        for batch in self._batches:
            yield batch

    async def chunks(self) -> AsyncIterator[bytes]:  # pragma: no cover - the relay asks for batches
        for batch in self._batches:
            for payload in batch:
                yield payload

    async def aclose(self) -> None:
        pass


def _chunk(text: str) -> bytes:
    import orjson

    choice = {"index": 0, "delta": {"content": text}}
    return orjson.dumps({"id": "c", "object": "chat.completion.chunk", "choices": [choice]})


async def _chat_stream(batches: list[list[bytes]]) -> list[dict[str, Any]]:

    from gateway.api.app import create_app
    from gateway.config import parse_settings

    models = [{"name": "gpt-4o-mini", "litellm_model": "openai/gpt-4o-mini", "api_base": "http://127.0.0.1:9/v1"}]
    app = create_app(parse_settings({"models": models}))

    async def open_stream(*args: Any, **kwargs: Any) -> _Batched:
        return _Batched(batches)

    app.state.gateway.upstream.open_stream = open_stream
    return (await _send_hi(app))[1:]


async def _send_hi(app: Any) -> list[dict[str, Any]]:
    """Every ASGI message ``app`` sends for a streamed "hi" to chat completions; the client stays connected."""
    import orjson

    from tests.inproc import body_once, post_scope

    raw = orjson.dumps({"model": "gpt-4o-mini", "stream": True, "messages": [{"role": "user", "content": "hi"}]})
    sent: list[dict[str, Any]] = []
    gone = asyncio.Event()  # never set: the client stays

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    async with app.router.lifespan_context(app):
        await app(post_scope("/v1/chat/completions", len(raw)), body_once(raw, gone), send)
    return sent


async def test_events_that_arrive_together_leave_together() -> None:
    """Three events read from the provider at once are one write to the client, not three."""
    first = [_chunk("a"), _chunk("b"), _chunk("c")]
    sent = await _chat_stream([first, [_chunk("d")]])  # the provider's [DONE] ends the batches
    bodies = [m["body"] for m in sent]
    assert bodies[0] == b"".join(b"data: " + p + b"\n\n" for p in first)
    assert bodies[1] == b"data: " + _chunk("d") + b"\n\n"
    assert bodies[-1] == b"data: [DONE]\n\n" and len(bodies) == 3


async def test_events_before_a_bad_one_in_the_same_read_are_relayed_before_the_error() -> None:
    sent = await _chat_stream([[_chunk("a"), b"not json", _chunk("never")]])
    data = b"".join(m["body"] for m in sent)
    assert data.startswith(b"data: " + _chunk("a") + b"\n\n")
    assert b"not JSON" in data and b"never" not in data and b"[DONE]" not in data
