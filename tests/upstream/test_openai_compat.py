"""Relaying an OpenAI-compatible stream: SSE lines end at LF only, whatever the text contains."""

from __future__ import annotations

from typing import Any

import openai
import pytest

from tests.procs import GatewayHandle


@pytest.mark.parametrize("separator", ["\x85", "\u2028", "\u2029", "\x0b", "\x0c", "\x1c"])
def test_unicode_line_separators_survive_the_stream(passthrough_gateway: GatewayHandle, separator: str) -> None:
    client = openai.OpenAI(base_url=passthrough_gateway.base_url, api_key="sk-sse", max_retries=0)
    messages = [{"role": "user", "content": f"before{separator}after"}]
    plain = client.chat.completions.create(model="gpt-4o-mini", messages=messages).choices[0].message.content
    chunks = list(client.chat.completions.create(model="gpt-4o-mini", messages=messages, stream=True))
    streamed = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert separator in streamed
    assert streamed == plain


class _FakeResponse:
    def __init__(self, reads: list[bytes]) -> None:
        self._reads = reads

    async def iter_any(self) -> Any:
        for data in self._reads:
            yield data

    def buffered(self) -> bytes:
        return b""

    def release(self) -> None:
        pass


async def test_streams_tell_their_reads_and_a_responses_stream_still_ends_at_its_last_event() -> None:
    """``batches`` gives the events of one read together; the Responses stream, which ends at an event,
    goes event by event through its own ``chunks`` (it once recursed between the two)."""
    from gateway.upstream.openai_compat import _ResponseEventStream, _SSEStream

    chat = _SSEStream(_FakeResponse([b"data: 1\n\ndata: 2\n\n", b"data: 3\n\ndata: [DONE]\n\n"]))  # type: ignore[arg-type]
    assert [batch async for batch in chat.batches()] == [[b"1", b"2"], [b"3"]]
    events = [b'{"type":"response.created"}', b'{"type":"response.completed"}', b'{"type":"late"}']
    wire = b"".join(b"data: " + e + b"\n\n" for e in events)
    responses = _ResponseEventStream(_FakeResponse([wire]))  # type: ignore[arg-type]
    assert [p async for p in responses.chunks()] == events[:2]
    responses = _ResponseEventStream(_FakeResponse([wire]))  # type: ignore[arg-type]
    assert [b async for b in responses.batches()] == [[events[0]], [events[1]]]


async def test_a_stream_ended_by_its_last_event_leaves_no_reader_for_the_loop_to_close() -> None:
    """The body's reader is closed where the stream ends it early ([DONE], a Responses stream's last event):
    dropped unfinished, the loop's finaliser closed it in a task of its own, woken with an eventfd write."""
    import gc
    import sys

    from gateway.upstream.openai_compat import _ResponseEventStream, _SSEStream

    finalised: list[str] = []
    firstiter, finalizer = sys.get_asyncgen_hooks()

    def noted(agen: Any) -> None:
        finalised.append(agen.__qualname__)
        if finalizer is not None:
            finalizer(agen)

    sys.set_asyncgen_hooks(firstiter=firstiter, finalizer=noted)
    try:
        chat = _SSEStream(_FakeResponse([b"data: 1\n\ndata: [DONE]\n\n", b"data: never\n\n"]))  # type: ignore[arg-type]
        assert [batch async for batch in chat.batches()] == [[b"1"]]
        wire = b'data: {"type":"response.completed"}\n\ndata: {"type":"late"}\n\n'
        responses = _ResponseEventStream(_FakeResponse([wire, b"data: never\n\n"]))  # type: ignore[arg-type]
        assert [p async for p in responses.chunks()] == [b'{"type":"response.completed"}']
        del chat, responses
        gc.collect()
    finally:
        sys.set_asyncgen_hooks(firstiter=firstiter, finalizer=finalizer)
    assert finalised == []
