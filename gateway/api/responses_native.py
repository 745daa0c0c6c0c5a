"""Forward a Responses request natively: the client's body, the gateway's edits, the provider's own answer.

``answer_chat`` assembles the chat view of the request as for every door; for a model that
speaks Responses (``ModelConfig.speaks_responses``) the route hands it a ``NativeResponses``,
which renders what the passes decided onto the client's own body (``formats/responses_edits``)
and posts it to the upstream's ``/responses``. The provider's Response (or its event stream)
goes back to the client as the provider wrote it, event payloads byte for byte; the record,
metrics and calibration read its usage and output as on the chat path. The record keeps the
chat view the passes saw (docs/responses.md).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
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
from gateway.errors import UpstreamError, VentanaError
from gateway.formats.responses_edits import ResponsesView, apply_edits
from gateway.object_memo import ObjectMemo
from gateway.store.record import Answer
from gateway.upstream.openai_compat import event_type
from gateway.upstream.usage import normalise_usage

log = logging.getLogger("ventana")
_JSON = "application/json"
_FINAL_EVENTS = ("response.completed", "response.incomplete", "response.failed")


#: policy -> the policy of a native request: the gateway's settings, the same object every request.
_NATIVE_POLICIES: ObjectMemo[dict[str, Policy]] = ObjectMemo(limit=64)


def native_policy(policy: Policy, provider: str) -> Policy:
    """The policy a request forwarded natively is assembled with.

    The loop that answers the gateway's own ``find_tools`` speaks chat only, so where tool selection
    would prune and serve it (mode ``prune``, the ``auto`` default off Anthropic), a native request
    keeps the client's tools untouched (the provider's prefix cache keeps them cheap); a configured
    ``allowed_tools`` mode (OpenAI's own restriction) still applies."""
    tools = policy.tools
    if not (tools.enabled and tools.find_tools and tools.mode_for(provider) == "prune"):
        return policy
    per_provider = _NATIVE_POLICIES.get_or(policy, lambda _p: {})
    found = per_provider.get(provider)
    if found is None:
        found = per_provider[provider] = policy.model_copy(
            update={"tools": tools.model_copy(update={"enabled": False})}
        )
    return found


@dataclass(slots=True)
class NativeResponses:
    """One Responses request bound for an upstream that speaks Responses.

    ``keep`` stores the provider's Response (for ``previous_response_id``) before the client
    can see it completed; ``used`` tells the route the answer is already in the client's format
    (false when the request crossed to chat after all: the gateway served a tool of its own)."""

    view: ResponsesView
    keep: Callable[[dict[str, Any], str], Awaitable[None]]
    used: bool = False
    sent: dict[str, Any] | None = None  # the body the provider received, for the route and the tests
    #: A request offering one of the gateway's own tools crosses to chat, whose loop serves them.
    falls_back: bool = True
    #: The record keeps the chat view the passes saw (not yet the Responses body that was sent).
    original: dict[str, Any] | None = None
    raw: bytes | None = None

    def policy(self, policy: Policy, provider: str) -> Policy:
        return native_policy(policy, provider)

    def body(self, assembly: Assembly, model: ModelConfig) -> tuple[dict[str, Any], bytes]:
        """What the record keeps as forwarded: the assembled chat view (see ``original``)."""
        view = assembly.assembled.body()
        return view, orjson.dumps(view)

    def body_for(self, assembly: Assembly, upstream_model: str) -> dict[str, Any]:
        original, assembled = assembly.original, assembly.assembled
        return apply_edits(
            self.view,
            original.messages,
            assembled.messages,
            original.tools,
            assembled.tools,
            original.params,
            assembled.params,
            upstream_model,
        )

    async def answer(self, flight: InFlight, assembly: Assembly, api_key: str | None) -> Response:
        self.used = True
        gw, model = flight.gw, flight.model
        body = self.sent = self.body_for(assembly, model.upstream_model)
        raw = orjson.dumps(body)
        overhead_ms = flight.elapsed_ms()
        session = flight.sent.session_id
        if not body.get("stream"):
            data = await _reach_upstream(flight, overhead_ms, gw.upstream.responses_complete(model, raw, api_key))
            ttfb_ms = flight.elapsed_ms() - overhead_ms
            await self.keep(data, session)
            answer = answer_of(data)
            journal(flight, answer, 200, None, overhead_ms, ttfb_ms)
            asyncio.get_running_loop().call_soon(_count_and_finish, flight, answer, 200, None, overhead_ms, ttfb_ms)
            return Response(orjson.dumps(data), media_type=_JSON, headers=flight.headers)
        upstream = await _reach_upstream(flight, overhead_ms, gw.upstream.responses_stream(model, raw, api_key))
        ttfb_ms = flight.elapsed_ms() - overhead_ms

        async def events() -> AsyncIterator[bytes]:
            status: int = CLIENT_CLOSED
            error: str | None = "client disconnected before the stream ended"
            final: Mapping[str, Any] | None = None
            seen = _Seen()
            try:
                async for payload in upstream.chunks():
                    kind = event_type(payload)
                    if kind in _SNAPSHOT_EVENTS or kind in _FINAL_EVENTS:
                        event = seen.note(payload) or {}
                        final = event.get("response") if kind in _FINAL_EVENTS else final
                        if kind in _FINAL_EVENTS and isinstance(final, dict) and kind != "response.failed":
                            await self.keep(final, session)  # before the client sees it and can chain on it
                            journal(flight, answer_of(final), 200, None, overhead_ms, ttfb_ms)
                    else:
                        seen.count(payload)
                    yield b"event: " + kind.encode() + b"\ndata: " + payload + b"\n\n"
                status, error = 200, None
                if final is None or (final.get("status") == "failed"):
                    status, error = 502, "the provider's stream ended without a completed response"
            except UpstreamError as exc:
                status, error = exc.status_code, exc.message
                metrics.UPSTREAM_ERRORS.labels(model.name, type(exc).__name__).inc()
                for block in seen.failed(exc.message, "rate_limit_exceeded" if exc.status_code == 429 else None):
                    yield block
            except Exception as exc:
                status, error = 500, f"internal gateway error while streaming: {type(exc).__name__}"
                log.exception("Responses relay failed for %s", flight.sent.request_id)
                for block in seen.failed(VentanaError(error).message, None):
                    yield block
            finally:
                loop = asyncio.get_running_loop()
                answer = answer_of(final or {})
                loop.call_soon(_count_and_finish, flight, answer, status, error, overhead_ms, ttfb_ms)
                await upstream.aclose()

        return EventStreamResponse(events(), headers=flight.headers)


_SNAPSHOT_EVENTS = ("response.created", "response.in_progress")


class _Seen:
    """What a relayed stream showed so far: the newest Response snapshot and sequence number, so that
    a stream the provider drops ends, as the API's own do, with ``error`` then ``response.failed``."""

    def __init__(self) -> None:
        self.response: dict[str, Any] = {}
        self.sequence = -1

    def note(self, payload: bytes) -> dict[str, Any] | None:
        event = orjson.loads(payload)
        if not isinstance(event, dict):
            return None
        if isinstance(event.get("response"), dict):
            self.response = event["response"]
        self._sequence(event)
        return event

    def count(self, payload: bytes) -> None:
        """Follow the sequence number without parsing the whole event (text deltas are most of a stream)."""
        at = payload.rfind(b'"sequence_number":')
        if at >= 0:
            digits = payload[at + 18 :].lstrip()[:12]
            number = digits[: len(digits) - len(digits.lstrip(b"0123456789"))]
            if number:
                self.sequence = max(self.sequence, int(number))

    def _sequence(self, event: Mapping[str, Any]) -> None:
        number = event.get("sequence_number")
        if isinstance(number, int):
            self.sequence = max(self.sequence, number)

    def failed(self, message: str, code: str | None) -> list[bytes]:
        code = code or "server_error"  # the Response error codes are a closed list
        self.sequence += 1
        error = {"type": "error", "code": code, "message": message, "param": None, "sequence_number": self.sequence}
        self.sequence += 1
        response = {**self.response, "status": "failed", "error": {"code": code, "message": message}}
        failed = {"type": "response.failed", "response": response, "sequence_number": self.sequence}
        return [_sse(error), _sse(failed)]


def _sse(event: Mapping[str, Any]) -> bytes:
    return b"event: " + str(event["type"]).encode() + b"\ndata: " + orjson.dumps(event) + b"\n\n"


def chat_usage(usage: Any) -> dict[str, Any] | None:
    """A Response's usage in the chat shape the gateway's records and metrics read."""
    if not isinstance(usage, Mapping):
        return None
    details = usage.get("input_tokens_details")
    cached = details.get("cached_tokens", 0) if isinstance(details, Mapping) else 0
    return {
        "prompt_tokens": usage.get("input_tokens", 0),
        "completion_tokens": usage.get("output_tokens", 0),
        "total_tokens": usage.get("total_tokens", 0),
        "prompt_tokens_details": {"cached_tokens": cached},
    }


def answer_of(response: Mapping[str, Any]) -> Answer:
    """What a Response answered, as the record keeps it (text, function calls, finish, usage)."""
    text: list[str] = []
    calls: list[dict[str, Any]] = []
    for item in response.get("output") or ():
        if not isinstance(item, Mapping):
            continue
        if item.get("type") == "message":
            text.extend(str(p.get("text") or "") for p in item.get("content") or () if isinstance(p, Mapping))
        elif item.get("type") == "function_call":
            function = {"name": item.get("name"), "arguments": item.get("arguments")}
            calls.append({"id": item.get("call_id"), "type": "function", "function": function})
    finish = "tool_calls" if calls else ("length" if response.get("status") == "incomplete" else "stop")
    _, usage = normalise_usage(chat_usage(response.get("usage")))
    return Answer(dict(response) or None, "".join(text) or None, finish, calls or None, usage)
