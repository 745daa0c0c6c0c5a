"""Native forwarding on ``/v1/messages``: an ``anthropic/`` model gets the client's own Messages body.

The front door builds the chat-shaped view (``chat_body(..., native=True)``) and hands it to
``answer_chat`` with a ``NativeMessages``: the passes run on the view as on any request (session,
edges, assembly, record), then ``body`` applies their result to the client's body
(``formats.messages_apply``) and ``answer`` forwards it over the pooled httpx client
(``upstream.anthropic_native``) with the client's ``anthropic-version`` and ``anthropic-beta``.
The client gets the upstream's answer as it came, JSON or event stream, byte for byte; the
record reads it on the way (``formats.anthropic_answer``).

The gateway-served tools (``find_tools``, recall's tool mode) are not offered on this path: the
client's tools go out as its own, and tool selection toward Anthropic uses ``defer_loading``
with Anthropic's tool search (the default ``tools.modes`` for ``anthropic``).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass
from typing import Any

import orjson
from starlette.responses import Response

from gateway import metrics
from gateway.api.answer import CLIENT_CLOSED, InFlight, _count_and_finish, _reach_upstream, journal
from gateway.api.event_stream import EventStreamResponse
from gateway.assembly.pipeline import Assembly
from gateway.assembly.policy import Policy
from gateway.config import ModelConfig
from gateway.errors import UpstreamError
from gateway.formats.anthropic_answer import MessageTally, chat_usage, recorded_parts
from gateway.formats.anthropic_messages import error_body
from gateway.formats.messages_apply import messages_body
from gateway.store.record import Answer
from gateway.upstream.types import PASSED_HEADERS
from gateway.upstream.usage import normalise_usage

_JSON = "application/json"
#: Providers whose upstream gets the Messages body natively (litellm's others still translate).
NATIVE_PROVIDERS = frozenset({"anthropic"})
log = logging.getLogger("ventana")


def answer_of(message: Mapping[str, Any], response: dict[str, Any] | None) -> Answer:
    """The record's answer for a Messages ``message`` (``response`` is the whole body, non-streamed only)."""
    text, finish, calls = recorded_parts(message)
    _, usage = normalise_usage(chat_usage(message.get("usage")))
    return Answer(response, text, finish, calls, usage)


@dataclass(frozen=True, slots=True)
class NativeMessages:
    """One Messages request to a Messages upstream: the client's body, its view, the headers to pass on."""

    original: dict[str, Any]
    raw: bytes
    view: dict[str, Any]
    headers: Mapping[str, str]

    @classmethod
    def of(
        cls, original: dict[str, Any], raw: bytes, view: dict[str, Any], headers: Mapping[str, str]
    ) -> NativeMessages:
        return cls(original, raw, view, {k: headers[k] for k in PASSED_HEADERS if headers.get(k)})

    #: Never crosses to chat: the gateway's own tools are not offered on this path.
    falls_back = False

    def policy(self, policy: Policy, provider: str) -> Policy:
        return policy

    def body(self, assembly: Assembly, model: ModelConfig) -> tuple[dict[str, Any], bytes]:
        """The body to forward and its bytes: the client's own bytes when nothing changed it."""
        done = assembly.assembled
        out = messages_body(self.original, self.view, done.messages, done.tools, model.upstream_model)
        if out is self.original:
            return self.original, self.raw
        body = dict(out)
        return body, orjson.dumps(body)

    async def answer(self, flight: InFlight, assembly: Assembly, api_key: str | None) -> Response:
        if flight.sent.stream:
            return await self._stream(flight, api_key)
        upstream = flight.gw.upstream.messages
        overhead_ms = flight.elapsed_ms()
        raw = flight.sent.assembled_json or orjson.dumps(flight.sent.assembled)
        data = await _reach_upstream(flight, overhead_ms, upstream.complete(flight.model, raw, api_key, self.headers))
        ttfb_ms = flight.elapsed_ms() - overhead_ms
        try:
            message = orjson.loads(data)
        except orjson.JSONDecodeError:
            message = {}
        answer = answer_of(message if isinstance(message, dict) else {}, message if isinstance(message, dict) else None)
        journal(flight, answer, 200, None, overhead_ms, ttfb_ms)
        asyncio.get_running_loop().call_soon(_count_and_finish, flight, answer, 200, None, overhead_ms, ttfb_ms)
        return Response(data, media_type=_JSON, headers=flight.headers)

    async def _stream(self, flight: InFlight, api_key: str | None) -> Response:
        upstream = flight.gw.upstream.messages
        overhead_ms = flight.elapsed_ms()
        raw = flight.sent.assembled_json or orjson.dumps(flight.sent.assembled)
        opened = await _reach_upstream(
            flight, overhead_ms, upstream.open_stream(flight.model, raw, api_key, self.headers)
        )
        ttfb_ms = flight.elapsed_ms() - overhead_ms
        tally = MessageTally()

        async def events() -> AsyncIterator[bytes]:
            status: int = CLIENT_CLOSED
            error: str | None = "client disconnected before the stream ended"
            try:
                journaled = False
                async for data in opened.chunks():
                    tally.feed(data)
                    if tally.stopped and not journaled:  # the chunk ending the answer: journal it first
                        journaled = True
                        journal(flight, answer_of(tally.message, None), 200, None, overhead_ms, ttfb_ms)
                    yield data
                status, error = 200, None
                if tally.error is not None:
                    status, error = 502, str(tally.error.get("message"))
            except UpstreamError as exc:
                status, error = exc.status_code, exc.message
                metrics.UPSTREAM_ERRORS.labels(flight.model.name, type(exc).__name__).inc()
                yield b"event: error\ndata: " + orjson.dumps(error_body(exc.status_code, exc.message)) + b"\n\n"
            except Exception as exc:
                status, error = 500, f"internal gateway error while streaming: {type(exc).__name__}"
                log.exception("messages relay failed for %s", flight.sent.request_id)
                yield b"event: error\ndata: " + orjson.dumps(error_body(500, error)) + b"\n\n"
            finally:
                loop = asyncio.get_running_loop()
                loop.call_soon(
                    _count_and_finish, flight, answer_of(tally.message, None), status, error, overhead_ms, ttfb_ms
                )
                await opened.aclose()

        return EventStreamResponse(events(), headers=flight.headers)
