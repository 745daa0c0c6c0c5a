"""``POST /v1/messages`` and ``/v1/messages/count_tokens``: the Anthropic Messages front door.

A Messages request is translated into a Chat Completions body (``formats.anthropic_messages``)
and answered by ``answer_chat``, the seam the chat route uses: the same validation, session
naming, assembly passes, forwarding, recording and metrics. The answer (or its chunk stream)
is translated back. Every error leaves in Anthropic's shape
``{"type": "error", "error": {"type", "message"}}``, because Anthropic's SDKs read that one.

The chat seam carries no headers: ``anthropic-beta`` reaches Claude-format upstreams as litellm's
``extra_headers`` in the body; ``anthropic-version`` is litellm's to set.
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import AsyncIterator, Callable, Mapping
from typing import Any

import orjson
from starlette.requests import Request
from starlette.responses import Response

from gateway import metrics
from gateway.api.auth import bearer, caller_of
from gateway.api.chat import ASSEMBLE_OFF_LOOP_BYTES, answer_chat, configured_model, read_body
from gateway.api.deps import Gateway
from gateway.api.event_stream import EventStreamResponse
from gateway.api.refusals import record_refusal
from gateway.errors import RequestError, UpstreamError, VentanaError
from gateway.formats.anthropic_messages import CLAUDE_PROVIDERS, chat_body, error_body, message_from_chat
from gateway.formats.anthropic_stream import MessagesStream, chat_payloads

_JSON = "application/json"
#: Bodies from this size on are translated and counted in a worker thread, as chat assembles them.
OFF_LOOP_BYTES = ASSEMBLE_OFF_LOOP_BYTES
#: Chat error types in a stream, as the HTTP status Anthropic's ``error`` event type is chosen by.
_STREAM_STATUS: Mapping[str, int] = {"rate_limit_error": 429, "timeout_error": 504, "invalid_request_error": 400}

Admit = Callable[[Request], object]


def client_key(headers: Mapping[str, str]) -> str | None:
    """The caller's key: ``Authorization: Bearer`` or, as Anthropic's SDKs send it, ``x-api-key``."""
    return bearer(headers) or headers.get("x-api-key") or None


def anthropic_error(exc: VentanaError) -> Response:
    if exc.status_code < 500 and not isinstance(exc, UpstreamError):  # upstream ones: counted in chat.py
        metrics.REJECTED.labels(exc.code or exc.error_type).inc()
    body = orjson.dumps(error_body(exc.status_code, exc.message))
    return Response(body, status_code=exc.status_code, media_type=_JSON, headers=exc.headers)


async def _request(request: Request, gw: Gateway, admit: Admit) -> tuple[bytes, dict[str, Any]]:
    admit(request)
    raw = await read_body(request, gw.settings.limits.max_body_bytes)
    try:
        parsed = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise RequestError(f"the request body is not valid JSON: {exc}", code="invalid_json") from exc
    if not isinstance(parsed, dict):
        raise RequestError("the request body must be a JSON object", code="invalid_json")
    return raw, parsed


def _chat_bytes(parsed: dict[str, Any], provider: str, beta: str | None = None) -> bytes:
    """The chat body's JSON; a client's ``anthropic-beta`` rides along as litellm's ``extra_headers``
    (Claude Code's betas change what the API accepts, so a Claude upstream must see them)."""
    body = chat_body(parsed, provider)
    if beta:
        body["extra_headers"] = {"anthropic-beta": beta}
    return orjson.dumps(body)


def _provider(gw: Gateway, name: Any) -> str:
    model = gw.settings.model(name) if isinstance(name, str) else None
    return model.provider if model is not None else ""


async def create_message(request: Request, gw: Gateway, admit: Admit) -> Response:
    started = time.perf_counter()
    try:
        await gw.recorder.room()  # a store far behind slows clients down rather than filling memory
        raw, parsed = await _request(request, gw, admit)
        provider = _provider(gw, parsed.get("model"))
        beta = request.headers.get("anthropic-beta") if provider in CLAUDE_PROVIDERS else None
        if len(raw) >= OFF_LOOP_BYTES:  # ~1-2 ms of Python for a 420 KB agent request: not on the loop
            chat = await asyncio.to_thread(_chat_bytes, parsed, provider, beta)
        else:
            chat = _chat_bytes(parsed, provider, beta)
        key = client_key(request.headers)
        named = request.headers.get("x-session-id")
        answer = await answer_chat(gw, chat, caller_of(key), key, named, started=started, route="messages")
    except VentanaError as exc:
        refused = anthropic_error(exc)
        if exc.status_code < 500 and not isinstance(exc, UpstreamError):
            refused.headers.setdefault("x-ventana-request-id", "req-" + os.urandom(10).hex())
            record_refusal(gw, request, exc, refused.headers["x-ventana-request-id"])
        return refused
    headers = {k: v for k, v in answer.headers.items() if k.startswith("x-ventana-")}
    model = str(parsed["model"])
    if isinstance(answer, EventStreamResponse):
        return EventStreamResponse(_events(answer.events, model), headers=headers)
    message = message_from_chat(orjson.loads(answer.body), model)
    return Response(orjson.dumps(message), media_type=_JSON, headers=headers)


async def _events(chat: AsyncIterator[bytes], model: str) -> AsyncIterator[bytes]:
    """The Messages events for a chat chunk stream; closing this closes (and so records) the chat stream."""
    stream = MessagesStream(model)
    buffer = bytearray()
    try:
        async for data in chat:
            for payload in chat_payloads(buffer, data):
                if payload == b"[DONE]":
                    continue
                chunk = orjson.loads(payload)
                error = chunk.get("error")
                if isinstance(error, Mapping):
                    status = _STREAM_STATUS.get(str(error.get("type")), 500)
                    yield stream.error(status, str(error.get("message")))
                    return
                for event in stream.feed(chunk):
                    yield event
        for event in stream.finish():
            yield event
    finally:
        close = getattr(chat, "aclose", None)
        if close is not None:
            await close()


async def count_tokens(request: Request, gw: Gateway, admit: Admit) -> Response:
    """``{"input_tokens": N}`` with the model's tokenizer, counted as the chat route counts a prompt."""
    try:
        raw, parsed = await _request(request, gw, admit)
        body = chat_body({"max_tokens": 1, **parsed}, "")  # count_tokens takes no max_tokens
        model = configured_model(gw, body)
    except VentanaError as exc:
        return anthropic_error(exc)
    counter = gw.counter(model)
    messages, tools = body["messages"], body.get("tools")
    if len(raw) >= OFF_LOOP_BYTES:
        tokens = await asyncio.to_thread(counter.request, messages, tools)
    else:
        tokens = counter.request(messages, tools)
    return Response(orjson.dumps({"input_tokens": tokens}), media_type=_JSON)
