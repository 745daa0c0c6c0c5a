"""``POST /v1/messages`` and ``/v1/messages/count_tokens``: the Anthropic Messages front door.

A Messages request is translated into a Chat Completions body (``formats.anthropic_messages``)
and answered by ``answer_chat``, the seam the chat route uses: the same validation, session
naming, assembly passes, forwarding, recording and metrics. Toward an ``anthropic/`` model the
chat body is only the passes' view: the client's own Messages body, with their edits applied in
its format, is what goes upstream, and the upstream's answer comes back as it is
(``api/messages_native.py``). Toward any other model the answer (or its chunk stream) is
translated back. Every error leaves in Anthropic's shape
``{"type": "error", "error": {"type", "message"}}``, because Anthropic's SDKs read that one.

``anthropic-version`` and ``anthropic-beta`` travel with a natively forwarded body; toward
``bedrock``/``vertex_ai`` (through litellm) ``anthropic-beta`` rides as litellm's ``extra_headers``.
The session is the client's ``X-Session-Id``, else Claude Code's own session id
(``sessions.identify.client_session``).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Mapping
from typing import Any

import orjson
from starlette.requests import Request
from starlette.responses import Response

from gateway import metrics
from gateway.api.admission import Principal, admitted
from gateway.api.chat import ASSEMBLE_OFF_LOOP_BYTES, answer_chat, configured_model, json_object, read_body
from gateway.api.deps import Gateway
from gateway.api.event_stream import EventStreamResponse
from gateway.api.messages_native import NATIVE_PROVIDERS, NativeMessages
from gateway.api.owned_stream import OwnedStream
from gateway.api.refusals import record_refusal
from gateway.api.request_ids import REQUEST_ID_HEADER, new_request_id
from gateway.assembly.client_plan import ClientAsk, messages_ask
from gateway.errors import UpstreamError, VentanaError
from gateway.formats.anthropic_context_edits import apply_context_edits
from gateway.formats.anthropic_messages import CLAUDE_PROVIDERS, chat_body, error_body, message_from_chat
from gateway.formats.anthropic_stream import MessagesStream, chat_payloads
from gateway.sessions.identify import client_session

_JSON = "application/json"
log = logging.getLogger("ventana")
#: Bodies from this size on are translated and counted in a worker thread, as chat assembles them.
OFF_LOOP_BYTES = ASSEMBLE_OFF_LOOP_BYTES
#: Chat error types in a stream, as the HTTP status Anthropic's ``error`` event type is chosen by.
_STREAM_STATUS: Mapping[str, int] = {"rate_limit_error": 429, "timeout_error": 504, "invalid_request_error": 400}

Admit = Callable[[Request], Principal]


def anthropic_error(exc: VentanaError) -> Response:
    if exc.status_code < 500 and not isinstance(exc, UpstreamError):  # upstream ones: counted in chat.py
        metrics.REJECTED.labels(exc.code or exc.error_type).inc()
    body = orjson.dumps(error_body(exc.status_code, exc.message))
    return Response(body, status_code=exc.status_code, media_type=_JSON, headers=exc.headers)


async def _request(request: Request, gw: Gateway, admit: Admit) -> tuple[bytes, dict[str, Any]]:
    admit(request)
    raw = await read_body(request, gw.settings.limits.max_body_bytes)
    return raw, json_object(raw)


def _chat_bytes(parsed: dict[str, Any], provider: str, beta: str | None = None) -> bytes:
    """The chat body's JSON; a client's ``anthropic-beta`` rides along as litellm's ``extra_headers``
    (Claude Code's betas change what the API accepts, so a Claude upstream must see them)."""
    body = chat_body(parsed, provider)
    if beta:
        body["extra_headers"] = {"anthropic-beta": beta}
    return orjson.dumps(body)


def _view(parsed: dict[str, Any]) -> tuple[dict[str, Any], bytes]:
    """The chat-shaped view of a body forwarded natively, and its JSON. Server tools stay out of the
    view's tools (the chat seam takes function tools; ``messages_apply`` puts them back)."""
    view = chat_body(parsed, "anthropic", native=True)
    if "tools" in view:
        view["tools"] = [t for t in view["tools"] if t.get("type") == "function"]
    return view, orjson.dumps(view)


def _context_edits(gw: Gateway, parsed: dict[str, Any]) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The client's ``context_management`` edits applied for an upstream that does not do them itself."""
    model = gw.settings.model(str(parsed.get("model")))
    if model is None:
        return parsed, []
    counter = gw.counter(model)

    def count(value: Any) -> int:
        return counter.text(value if isinstance(value, str) else orjson.dumps(value).decode())

    return apply_context_edits(parsed, count)


def _provider(gw: Gateway, name: Any) -> str:
    model = gw.settings.model(name) if isinstance(name, str) else None
    return model.provider if model is not None else ""


async def create_message(request: Request, gw: Gateway, admit: Admit) -> Response:
    started = time.perf_counter()
    try:
        await gw.recorder.room()  # a store far behind slows clients down rather than filling memory
        raw, parsed = await _request(request, gw, admit)
        provider = _provider(gw, parsed.get("model"))
        native: NativeMessages | None = None
        client: ClientAsk | None = None  # the client's context editing, which the gateway's compaction plans with
        applied: list[dict[str, Any]] | None = None  # context edits the gateway made for a non-Anthropic upstream
        off_loop = len(raw) >= OFF_LOOP_BYTES  # ~1-2 ms of Python for a 420 KB agent request: not on the loop
        if provider in NATIVE_PROVIDERS:
            view, chat = await asyncio.to_thread(_view, parsed) if off_loop else _view(parsed)
            native = NativeMessages.of(parsed, raw, view, request.headers)
        else:
            if parsed.get("context_management") is not None:  # Anthropic's context editing, done here
                asked = parsed["context_management"]
                parsed, applied = _context_edits(gw, parsed)
                client = messages_ask(asked, applied)
            beta = request.headers.get("anthropic-beta") if provider in CLAUDE_PROVIDERS else None
            chat = (
                await asyncio.to_thread(_chat_bytes, parsed, provider, beta)
                if off_loop
                else _chat_bytes(parsed, provider, beta)
            )
        named = client_session(request.headers, body=parsed)
        answer = await answer_chat(
            gw, chat, admitted(request), named, started=started, native=native, route="messages", client=client
        )
    except VentanaError as exc:
        refused = anthropic_error(exc)
        if exc.status_code < 500 and not isinstance(exc, UpstreamError):
            refused.headers.setdefault(REQUEST_ID_HEADER, new_request_id())
            record_refusal(gw, request, exc, refused.headers[REQUEST_ID_HEADER])
        return refused
    except Exception as exc:  # Anthropic's SDKs read only Anthropic's error shape, a 500 included
        log.exception("unexpected error on POST /v1/messages")
        return anthropic_error(VentanaError(f"internal gateway error: {type(exc).__name__}"))
    if native is not None:  # the upstream's own answer, in the client's format already
        return answer
    headers = {k: v for k, v in answer.headers.items() if k.startswith("x-ventana-")}
    model = str(parsed["model"])
    if isinstance(answer, EventStreamResponse):
        events = _events(answer.events, MessagesStream(model, applied))
        return EventStreamResponse(OwnedStream.around(events, answer.events), headers=headers)
    message = message_from_chat(orjson.loads(answer.body), model)
    if applied is not None:  # reported as Anthropic reports the edits it made
        message["context_management"] = {"applied_edits": applied}
    return Response(orjson.dumps(message), media_type=_JSON, headers=headers)


async def _events(chat: AsyncIterator[bytes], stream: MessagesStream) -> AsyncGenerator[bytes, None]:
    """The Messages events for a chat chunk stream; closing this closes (and so records) the chat stream."""
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
        body = chat_body({"max_tokens": 1, **parsed}, "", native=True)  # count_tokens takes no max_tokens
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
