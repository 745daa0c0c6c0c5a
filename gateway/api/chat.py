"""``POST /v1/chat/completions``: parse, assemble, forward, answer, record.

The request never waits for the database: the record is handed to the recorder's
queue after the answer is built (non-streamed) or after the last chunk (streamed).
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import os
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import replace
from typing import Any, TypeVar

import orjson
from starlette.requests import Request
from starlette.responses import Response

from gateway import metrics
from gateway.api.deps import Gateway
from gateway.api.edges import Turn
from gateway.api.event_stream import EventStreamResponse
from gateway.api.incremental_parse import IncrementalParser, Layout, message_ends
from gateway.api.own_tools import own_tools
from gateway.api.raw_forward import untouched_bytes, with_params_added, with_usage_requested
from gateway.api.served_tools import ServedTools
from gateway.api.stream_relay import StreamRelay
from gateway.api.token_offload import count_off_loop
from gateway.api.validate import validate_chat_request
from gateway.assembly.budget_report import budget_report
from gateway.assembly.context import Context, Env, SessionState, Summarizer
from gateway.assembly.lint_context import violations
from gateway.assembly.pipeline import FORWARD_PASSES, PASSES, Assembly, PassSpec, assemble, lint_findings
from gateway.assembly.policy import Policy
from gateway.assembly.prefix import PrefixReport, track_prefix
from gateway.assembly.request import context_from_body
from gateway.assembly.tool_payoff import cache_ratio
from gateway.config import ModelConfig
from gateway.errors import BodyTooLarge, LintViolation, RequestError, UnknownModel, UpstreamError, VentanaError
from gateway.sessions.identify import identify_session, scope_session
from gateway.store.record import RequestRecord
from gateway.upstream.usage import normalise_usage

_JSON = "application/json"
#: Bodies from this size on are assembled in a worker thread (a 105K-token agent request is ~420 KB)
#: unless nearly all of it is a resent history, whose counts and stubs are remembered: then
#: assembly costs ~1.7 ms at 105K tokens, less than the thread hop and its GIL hand-offs cost,
#: and it moves to a thread again from 4x this size.
ASSEMBLE_OFF_LOOP_BYTES = 256 * 1024
#: Messages a turn may add to a recognised history and still count as "nearly all resent".
RESENT_NEW_MESSAGES = 8
#: Recorded status of a stream the client abandoned (nginx's "client closed request").
CLIENT_CLOSED = 499
log = logging.getLogger("ventana")

T = TypeVar("T")


async def read_body(request: Request, limit: int) -> bytes:
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise BodyTooLarge(f"request body of {declared} bytes exceeds the limit of {limit} bytes")
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise BodyTooLarge(f"request body exceeds the limit of {limit} bytes")
        chunks.append(chunk)
    return b"".join(chunks)


def parse_request(raw: bytes, parser: IncrementalParser, caller: str) -> tuple[dict[str, Any], int]:
    """The body, and how many of its first messages are a previous turn's already-checked objects."""
    try:
        body, reused = parser.parse(raw, caller)
    except orjson.JSONDecodeError as exc:
        raise _invalid_json(exc) from exc
    return _json_object(body), reused


def _invalid_json(exc: orjson.JSONDecodeError) -> RequestError:
    return RequestError(f"the request body is not valid JSON: {exc}", code="invalid_json")


def _json_object(body: Any) -> dict[str, Any]:
    if not isinstance(body, dict):
        raise RequestError("the request body must be a JSON object", code="invalid_json")
    return body


def configured_model(gw: Gateway, body: dict[str, Any]) -> ModelConfig:
    model = gw.settings.model(body["model"])
    if model is None:
        raise UnknownModel(
            f"the model {body['model']!r} does not exist here; configured models: "
            f"{[m.name for m in gw.settings.models]}",
            param="model",
        )
    return model


def read_new_body(
    raw: bytes, gw: Gateway, caller: str, named: str | None
) -> tuple[dict[str, Any], ModelConfig, str, Layout]:
    """Parse and check a body parsed whole, name its session and find its message ends.

    Touches no shared state of the gateway's (the parser's memory is updated on the loop),
    so it can run in a worker thread.
    """
    try:
        body = _json_object(orjson.loads(raw))
    except orjson.JSONDecodeError as exc:
        raise _invalid_json(exc) from exc
    model, session_id = check_and_name(body, 0, gw, caller, named)
    return body, model, session_id, message_ends(raw, body["messages"])


def check_and_name(
    body: dict[str, Any], reused: int, gw: Gateway, caller: str, named: str | None
) -> tuple[ModelConfig, str]:
    """Validate the body (its first ``reused`` messages were checked before), find its model, name its session."""
    validate_chat_request(body, max_messages=gw.settings.limits.max_messages, known_valid=reused)
    model = configured_model(gw, body)
    return model, identify_session(named, caller, model.name, body["messages"])


def caller_hash(request: Request) -> tuple[str, str | None]:
    """Return a short hash of the caller's key (for grouping and scoping) and the bearer (never stored).

    In pass-through mode the bearer is the client's *provider* key, which tenants may share: the
    caller is then the gateway key (``X-Ventana-Key``) when one is sent, as auth admits it."""
    auth = request.headers.get("authorization", "")
    key = auth[7:].strip() if auth[:7].lower() == "bearer " else None
    access = request.app.state.access
    who = (access.gateway_key(request.headers) if access.config.passthrough else None) or key
    digest = hashlib.sha256(who.encode()).hexdigest()[:12] if who else "anonymous"
    return digest, key


def build_context(
    body: dict[str, Any],
    gw: Gateway,
    model: ModelConfig,
    state: SessionState,
    caller: str,
    summarizer: Summarizer | None = None,
) -> Context:
    info = gw.info(model)
    env = Env(
        counter=gw.counter(model).for_request(),
        context_window=info.context_window,
        model=model.name,
        provider=model.provider,
        now=time.time(),
        caller=caller,
        summarizer=summarizer,
        cache_price_ratio=cache_ratio(info.input_cost_per_token, info.cache_read_cost_per_token),
    )
    return context_from_body(body, env, state)


def assemble_and_track(ctx: Context, policy: Policy, passes: tuple[PassSpec, ...]) -> tuple[Assembly, PrefixReport]:
    """Assemble, then report the prefix: together, so a long new body does both in its thread
    (its prefix blocks are ~2 ms of hashing and encoding at 105K tokens)."""
    assembly = assemble(ctx, policy, passes)
    return assembly, track_prefix(assembly.assembled)


def forward_body(body: dict[str, Any], assembly: Assembly) -> dict[str, Any]:
    """The body the provider receives; the client's own object when nothing changed it."""
    original, assembled = assembly.original, assembly.assembled
    same = (
        assembled.messages is original.messages
        and assembled.tools is original.tools
        and assembled.params is original.params
    )
    if same and not original.extensions:
        return body  # only session state changed (e.g. the system prompt remembered): send the bytes as sent
    return assembly.assembled.body()


async def chat_completions(request: Request, gw: Gateway) -> Response:
    started = time.perf_counter()
    await gw.recorder.room()  # a store far behind slows clients down rather than filling memory
    raw = await read_body(request, gw.settings.limits.max_body_bytes)
    caller, client_key = caller_hash(request)
    return await answer_chat(gw, raw, caller, client_key, request.headers.get("x-session-id"), started=started)


async def answer_chat(
    gw: Gateway,
    raw: bytes,
    caller: str,
    client_key: str | None,
    named: str | None,
    *,
    started: float | None = None,
) -> Response:
    """Answer one Chat Completions body: the seam every front door (chat, Responses, Messages) goes through.

    ``raw`` is the Chat Completions JSON; ``named`` the client's session name, if any. Returns a JSON
    response or an event stream of chat chunks; raises a ``VentanaError`` the front door renders.
    """
    started = time.perf_counter() if started is None else started
    request_id = "req-" + os.urandom(10).hex()  # uuid4 is the same randomness, slower
    headers = {"x-ventana-request-id": request_id}
    if len(raw) >= ASSEMBLE_OFF_LOOP_BYTES and gw.parser.new_bytes(raw, caller) >= ASSEMBLE_OFF_LOOP_BYTES:
        # A long body mostly new to the gateway (a first turn of 105K tokens): parsing, checking,
        # naming it and finding its message ends is ~5 ms of Python holding the loop, so a worker
        # thread does it (the loop gets the GIL back every switch interval, and between C calls).
        body, model, session_id, layout = await asyncio.to_thread(read_new_body, raw, gw, caller, named)
        reused = 0
        gw.parser.remember(raw, caller, body, reused, layout)
    else:
        body, reused = parse_request(raw, gw.parser, caller)
        model, session_id = check_and_name(body, reused, gw, caller, named)
        gw.parser.remember(raw, caller, body, reused)  # no await since parse: the entry it reused is intact
    if not named:  # two conversations that open alike and then diverge are two sessions
        session_id = gw.conversations.name(caller, session_id, body["messages"])
    headers["x-ventana-session-id"] = session_id
    scoped = scope_session(caller, session_id)  # state is the caller's own, whatever name a client sends
    recognised = gw.resent.adopt(scoped, body, len(raw), known=reused)
    turn = Turn(request_id, scoped, caller, body)
    await count_off_loop(gw.counter(model), body, len(raw), scoped)
    summarizer = gw.edges.compaction.summarizer_for(model)
    ctx = build_context(body, gw, model, await gw.sessions.load(scoped), caller, summarizer)
    for edge in gw.edges.ordered:  # api/edges.py: checkpoints adopted, memory looked up, usage profiles
        ctx = await edge.before(ctx, turn)
    state = ctx.session
    tools_policy = gw.settings.policy.tools
    slow_scorer = tools_policy.enabled and tools_policy.scorer != "bm25"  # embedding scorers: 17-90 ms of CPU
    # A summariser's I/O, a slow scorer, or a body so large its assembly takes milliseconds (~3.5 ms
    # at 105K tokens seen for the first time): assemble in a thread, so the loop keeps serving others.
    resent = recognised >= len(body["messages"]) - RESENT_NEW_MESSAGES
    big = len(raw) >= (4 if resent else 1) * ASSEMBLE_OFF_LOOP_BYTES
    lint_after = gw.settings.policy.lint.mode != "strict"  # findings only report: made after the answer
    passes = FORWARD_PASSES if lint_after else PASSES
    if (summarizer is not None and gw.edges.compaction.policy.enabled) or slow_scorer or big:
        assembly, prefix = await asyncio.to_thread(assemble_and_track, ctx, gw.settings.policy, passes)
    else:
        assembly, prefix = assemble_and_track(ctx, gw.settings.policy, passes)
    await gw.sessions.save(replace(assembly.assembled.session, turn=state.turn + 1, previous_prefix=prefix.keys()))
    edge_decisions = [
        d for edge in gw.edges.ordered for d in await edge.after(turn, ctx, assembly.assembled, assembly.decisions)
    ]
    outgoing = forward_body(body, assembly)
    record = RequestRecord(
        request_id=request_id,
        session_id=session_id,
        created_at=time.time(),
        model=model.name,
        provider=model.provider,
        caller=caller,
        original=body,
        assembled=outgoing,
        decisions=[d.to_dict() for d in (*assembly.decisions, *edge_decisions)],
        stream=bool(body.get("stream")),
        turn=state.turn + 1,
        predicted_cached_tokens=prefix.predicted_cached_tokens,
        prefix_break=prefix.break_component,
        component_tokens=prefix.component_tokens(),
    )

    def count_tokens() -> None:
        """Counts, the budget report and lint findings: not needed to forward, so done after the answer."""
        record.tokens_original = ctx.prompt_tokens()
        same = assembly.assembled is ctx
        record.tokens_assembled = record.tokens_original if same else assembly.assembled.prompt_tokens()
        record.budget = _budget(gw, model, assembly)
        if lint_after:
            record.decisions.extend(d.to_dict() for d in lint_findings(assembly.assembled, gw.settings.policy))

    _reject_if_strict_lint(gw, record, assembly, started, count_tokens)
    served = own_tools(gw, model, turn, outgoing, record)  # None unless find_tools or recall_archive is offered
    api_key = gw.upstream.provider_key(model, client_key if gw.settings.auth.passthrough else None)
    raw_out = (
        untouched_bytes(raw, body, outgoing, model.upstream_model)
        or _params_spliced(raw, body, assembly, model)
        or _encoded(outgoing, model)
    )
    if gw.recorder.wants_json:  # a writer process parses these instead of unpickling dicts
        record.original_json, record.assembled_json = raw, raw_out
    if record.stream:
        return await _stream(
            gw, model, outgoing, body, api_key, record, headers, started, raw_out, count_tokens, served
        )
    return await _complete(gw, model, outgoing, api_key, record, headers, started, raw_out, count_tokens, served)


async def _complete(
    gw: Gateway,
    model: ModelConfig,
    outgoing: dict[str, Any],
    api_key: str | None,
    record: RequestRecord,
    headers: dict[str, str],
    started: float,
    raw_out: bytes | None = None,
    count_tokens: Callable[[], None] = lambda: None,
    served: ServedTools | None = None,
) -> Response:
    record.overhead_ms = (time.perf_counter() - started) * 1000
    if served is None:
        call = gw.upstream.complete(model, outgoing, api_key, raw=raw_out)
    else:  # the model's calls to the gateway's own tools are answered here, never returned
        call = served.complete(lambda b, r: gw.upstream.complete(model, b, api_key, raw=r), outgoing, raw_out)
    data = await _reach_upstream(gw, model, record, started, headers, call, count_tokens)
    record.ttfb_ms = (time.perf_counter() - started) * 1000 - record.overhead_ms
    usage_block, usage = normalise_usage(data.get("usage"))
    if usage_block is not None:
        data["usage"] = usage_block
    record.usage = usage
    record.response = data
    choice = (data.get("choices") or [{}])[0]
    message = choice.get("message") or {}
    record.response_text = message.get("content")
    record.tool_calls = message.get("tool_calls")
    record.finish_reason = choice.get("finish_reason")
    response = Response(orjson.dumps(data), media_type=_JSON, headers=headers)
    # Counting, metrics and recording run on the next loop turn, after this response is
    # written: the client does not wait for them, and a loop callback always runs (a
    # Starlette background task would not if the client had gone).
    asyncio.get_running_loop().call_soon(_count_and_finish, gw, record, started, count_tokens)
    return response


def _count_and_finish(
    gw: Gateway,
    record: RequestRecord,
    started: float,
    count_tokens: Callable[[], None],
    status: int = 200,
    error: str | None = None,
) -> None:
    _count(record, count_tokens)
    _finish(gw, record, started, status=status, error=error)


def _count(record: RequestRecord, count_tokens: Callable[[], None] | None) -> None:
    """Fill the record's token counts; counts are bookkeeping, so a failure is logged, never raised."""
    if count_tokens is None:
        return
    try:
        count_tokens()
    except Exception:  # the record is written without them rather than lost
        log.exception("counting tokens for request %s failed", record.request_id)


async def _reach_upstream(
    gw: Gateway,
    model: ModelConfig,
    record: RequestRecord,
    started: float,
    headers: dict[str, str],
    call: Awaitable[T],
    count_tokens: Callable[[], None] | None = None,
) -> T:
    """Await the provider; on failure record the request and raise the error its client gets.

    ``count_tokens`` is run before a failure is recorded when the caller has not run it yet.
    """
    try:
        return await call
    except UpstreamError as exc:
        _count(record, count_tokens)
        _finish(gw, record, started, status=exc.status_code, error=exc.message)
        metrics.UPSTREAM_ERRORS.labels(model.name, type(exc).__name__).inc()
        exc.headers.update(headers)  # the client can find the failed request's record by its id
        raise
    except Exception as exc:
        _count(record, count_tokens)
        raise _internal(gw, record, started, headers, exc) from exc


async def _stream(
    gw: Gateway,
    model: ModelConfig,
    outgoing: dict[str, Any],
    body: dict[str, Any],
    api_key: str | None,
    record: RequestRecord,
    headers: dict[str, str],
    started: float,
    raw_out: bytes | None = None,
    count_tokens: Callable[[], None] = lambda: None,
    served: ServedTools | None = None,
) -> Response:
    wants_usage = bool((body.get("stream_options") or {}).get("include_usage"))
    upstream_body = {**outgoing, "stream_options": {**(outgoing.get("stream_options") or {}), "include_usage": True}}
    upstream_raw = with_usage_requested(raw_out, outgoing) if raw_out is not None else None
    record.overhead_ms = (time.perf_counter() - started) * 1000
    if served is None:
        opening = gw.upstream.open_stream(model, upstream_body, api_key, raw=upstream_raw)
    else:  # held back until it shows whether it calls one of the gateway's own tools
        opening = served.open_stream(
            lambda b, r: gw.upstream.open_stream(model, b, api_key, raw=r), upstream_body, upstream_raw
        )
    stream = await _reach_upstream(gw, model, record, started, headers, opening, count_tokens)
    record.ttfb_ms = (time.perf_counter() - started) * 1000 - record.overhead_ms
    relay = StreamRelay(model_name=model.name, forward_usage=wants_usage)

    async def events() -> AsyncIterator[bytes]:
        # No retry in here: once a chunk reached the client, a second attempt would duplicate text.
        status: int = CLIENT_CLOSED
        error: str | None = "client disconnected before the stream ended"
        try:
            async for payload in stream.chunks():
                out = relay.feed(payload)
                if out is not None:
                    yield out
            status, error = 200, None
            yield b"data: [DONE]\n\n"
        except UpstreamError as exc:
            status, error = exc.status_code, exc.message
            metrics.UPSTREAM_ERRORS.labels(model.name, type(exc).__name__).inc()
            yield b"data: " + orjson.dumps(exc.body()) + b"\n\n"
        except Exception as exc:
            status, error = 500, f"internal gateway error while streaming: {type(exc).__name__}"
            log.exception("stream relay failed for %s", record.request_id)
            yield b"data: " + orjson.dumps(VentanaError(error).body()) + b"\n\n"
        finally:
            # Hand the record over before awaiting anything: if this generator is being cancelled
            # (the client hung up), an await could be interrupted and the rest never run. The
            # counting and recording run on the next loop turn, after the stream's end is written.
            relay.fill(record)
            loop = asyncio.get_running_loop()
            loop.call_soon(_count_and_finish, gw, record, started, count_tokens, status, error)
            await stream.aclose()

    return EventStreamResponse(events(), headers=headers)


def _params_spliced(raw: bytes, body: dict[str, Any], assembly: Assembly, model: ModelConfig) -> bytes | None:
    """The client's bytes plus the parameters a pass added, when that is all the passes changed."""
    original, assembled = assembly.original, assembly.assembled
    if (
        assembled.messages is not original.messages
        or assembled.tools is not original.tools
        or original.extensions
        or body.get("model") != model.upstream_model
        or any(assembled.params.get(k, _MISSING) is not v for k, v in original.params.items())
    ):
        return None
    return with_params_added(raw, {k: v for k, v in assembled.params.items() if k not in original.params})


_MISSING = object()


def _encoded(outgoing: dict[str, Any], model: ModelConfig) -> bytes | None:
    """``outgoing`` as JSON, encoded once for provider and store; None if the provider needs another model id."""
    if outgoing.get("model") != model.upstream_model:
        return None  # the upstream writes its own model id in; it encodes the body itself
    try:
        return orjson.dumps(outgoing)
    except TypeError:  # an integer past 64 bits: the upstream's encoder reports it as before
        return None


def _budget(gw: Gateway, model: ModelConfig, assembly: Assembly) -> dict[str, Any]:
    """The budget report of what the model sees, with the model's token-count calibration."""
    report = budget_report(assembly.assembled, scale=gw.calibration.scale_for(model.name, model.litellm_model))
    return {**report.to_dict(), "calibration": gw.calibration.stats(model.name).to_dict()}


def _reject_if_strict_lint(
    gw: Gateway, record: RequestRecord, assembly: Assembly, started: float, count_tokens: Callable[[], None]
) -> None:
    """In ``lint.mode: strict``, answer 400 naming the first violated check instead of forwarding."""
    lint = gw.settings.policy.lint
    found = violations(assembly.decisions) if lint.enabled and lint.mode == "strict" else []
    if not found:
        return
    check = str(found[0].detail.get("check"))
    error = LintViolation(
        f"the assembled context failed the lint check '{check}': {found[0].reason}"
        + (f" (and {len(found) - 1} more finding(s))" if len(found) > 1 else ""),
        param=check,
    )
    count_tokens()
    _finish(gw, record, started, status=400, error=error.message)
    raise error


def _internal(
    gw: Gateway, record: RequestRecord, started: float, headers: dict[str, str], exc: Exception
) -> VentanaError:
    """Record a request that failed inside the gateway, and the 500 its client gets."""
    log.exception("request %s failed inside the gateway", record.request_id)
    error = VentanaError(f"internal gateway error: {type(exc).__name__}", headers=headers)
    _finish(gw, record, started, status=500, error=error.message)
    return error


def _finish(gw: Gateway, record: RequestRecord, started: float, *, status: int, error: str | None = None) -> None:
    if status == 200 and record.usage.prompt_tokens:
        gw.calibration.observe(record.model, record.tokens_assembled, record.usage.prompt_tokens)
    record.status = status
    record.error = error
    record.total_ms = (time.perf_counter() - started) * 1000
    metrics.observe(record)
    for edge in gw.edges.ordered:  # e.g. the model's tool calls teach the tools' usage profiles
        try:
            edge.finish(record)
        except Exception:
            log.exception("edge %s failed to finish request %s", type(edge).__name__, record.request_id)
    try:
        gw.recorder.record(record)
    except Exception:
        # The provider has answered (and billed): failing the client now would lose the answer
        # as well as the record. The Recorder contract is not to raise; one that does is a bug
        # made loud here and counted.
        metrics.RECORDS_LOST.inc()
        log.exception("recorder refused request %s; its record is lost", record.request_id)
