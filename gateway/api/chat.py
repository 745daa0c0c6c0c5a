"""``POST /v1/chat/completions``: parse, assemble, forward, answer, record.

The request never waits for the database: the record is handed to the recorder's
queue after the answer is built (non-streamed) or after the last chunk (streamed).
"""

from __future__ import annotations

import asyncio
import time
from contextlib import nullcontext
from dataclasses import dataclass, replace
from functools import partial
from typing import Any, Protocol

import orjson
from starlette.requests import Request
from starlette.responses import Response

from gateway.api.admission import Principal
from gateway.api.answer import InFlight, complete, finish, stream
from gateway.api.deps import Gateway
from gateway.api.incremental_parse import IncrementalParser, Layout, message_ends
from gateway.api.raw_forward import untouched_bytes, with_params_added
from gateway.api.request_ids import REQUEST_ID_HEADER, new_request_id
from gateway.api.validate import validate_chat_request
from gateway.assembly.budget_report import budget_report
from gateway.assembly.client_plan import ClientAsk, plan_decision, planned_policy
from gateway.assembly.context import Context, Decision, Env, SessionState, Summarizer
from gateway.assembly.lint_context import violations
from gateway.assembly.pipeline import FORWARD_PASSES, PASSES, Assembly, PassSpec, assemble, lint_findings
from gateway.assembly.policy import Policy
from gateway.assembly.prefix import PrefixKeys, prefix_keys, track_prefix
from gateway.assembly.request import context_from_body
from gateway.assembly.tool_payoff import cache_ratio
from gateway.config import ModelConfig
from gateway.edges.edges import Turn
from gateway.edges.own_tools import own_tools
from gateway.edges.token_offload import BODY_BYTES_KEY, count_off_loop
from gateway.errors import BodyTooLarge, LintViolation, RequestError, UnknownModel
from gateway.sessions.identify import client_session, identify_session, scope_session
from gateway.store.record import Counts, Forwarded
from gateway.summarize.billing import summary_bill

#: Bodies from this size on are assembled in a worker thread (a 105K-token agent request is ~420 KB)
#: unless nearly all of it is a resent history, whose counts and stubs are remembered: then
#: assembly costs ~1.7 ms at 105K tokens, less than the thread hop and its GIL hand-offs cost,
#: and it moves to a thread again from 4x this size.
ASSEMBLE_OFF_LOOP_BYTES = 256 * 1024
#: Messages a turn may add to a recognised history and still count as "nearly all resent".
RESENT_NEW_MESSAGES = 8


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


def json_object(raw: bytes) -> dict[str, Any]:
    """The body as a JSON object, or the 400 every door answers for one that is not."""
    try:
        body = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise _invalid_json(exc) from exc
    return _json_object(body)


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
    body: dict[str, Any], reused: int, gw: Gateway, caller: str, named: str | None, known_tools: bool = False
) -> tuple[ModelConfig, str]:
    """Validate the body (its first ``reused`` messages, and with ``known_tools`` its tool list, were
    checked before), find its model, name its session."""
    limit = gw.settings.limits.max_messages
    validate_chat_request(body, max_messages=limit, known_valid=reused, known_tools=known_tools)
    model = configured_model(gw, body)
    return model, identify_session(named, caller, model.name, body["messages"])


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
        engine=model.engine,
        engine_slots=model.engine_slots,
        memos=gw.memos,
    )
    return context_from_body(body, env, state)


def assemble_and_track(ctx: Context, policy: Policy, passes: tuple[PassSpec, ...]) -> tuple[Assembly, PrefixKeys]:
    """Assemble, then name the prefix's blocks: together, so a long new body does both in its thread
    (its blocks are ~1 ms of hashing at 105K tokens). Their tokens are counted after the answer."""
    assembly = assemble(ctx, policy, passes)
    return assembly, prefix_keys(assembly.assembled)


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


class NativeDoor(Protocol):
    """A front door whose upstream speaks the client's own format (``api/messages_native.py``,
    ``api/responses_native.py``).

    ``answer_chat`` assembles the chat-shaped view as always; the door names the policy it can honour,
    puts the result back onto the client's own body (``body``), and forwards it and answers in that
    format (``answer``). ``original`` and ``raw`` are what the record keeps as the request's original
    (None: the chat view the passes saw)."""

    #: Whether the request may cross to chat after all when the gateway offers a tool of its own.
    falls_back: bool

    @property
    def original(self) -> dict[str, Any] | None: ...

    @property
    def raw(self) -> bytes | None: ...

    def policy(self, policy: Policy, provider: str) -> Policy:
        """The policy to assemble with: the gateway's, less what this door cannot forward natively."""
        ...

    def body(self, assembly: Assembly, model: ModelConfig) -> tuple[dict[str, Any], bytes]: ...

    async def answer(self, flight: InFlight, assembly: Assembly, api_key: str | None) -> Response: ...


async def chat_completions(request: Request, gw: Gateway, principal: Principal) -> Response:
    started = time.perf_counter()
    await gw.recorder.room()  # a store far behind slows clients down rather than filling memory
    raw = await read_body(request, gw.settings.limits.max_body_bytes)
    return await answer_chat(gw, raw, principal, client_session(request.headers), started=started)


async def answer_chat(
    gw: Gateway,
    raw: bytes,
    principal: Principal,
    named: str | None,
    *,
    started: float | None = None,
    native: NativeDoor | None = None,
    route: str = "chat",
    client: ClientAsk | None = None,
) -> Response:
    """Answer one Chat Completions body: the seam every front door (chat, Responses, Messages) goes through.

    ``raw`` is the Chat Completions JSON; ``principal`` the caller admission named (the only source
    of a caller: sessions, memory, served tools and the record are scoped by it); ``named`` the
    client's session name, if any. Returns a JSON
    response or an event stream of chat chunks; raises a ``VentanaError`` the front door renders.
    With ``native`` (an upstream that speaks the client's format) the chat body is the view the passes
    work on; ``native`` applies their result to the client's own body, forwards it and answers in its
    format. A door that ``falls_back`` sends the chat body instead when the gateway offers a tool of its
    own this request (its loop answers chat only). ``client``: the context management the client asked for
    and the door did; the gateway's compaction plans with its terms (``assembly/client_plan.py``).
    """
    started = time.perf_counter() if started is None else started
    opened = await open_turn(gw, raw, principal.caller, named)
    turn, body, model = opened.turn, opened.body, opened.model
    summarizer = gw.edges.compaction.summarizer_for(model, turn.scoped)
    ctx = build_context(body, gw, model, opened.loaded, turn.caller, summarizer)
    for edge in gw.edges.ordered:  # edges before (edges/edges.py): checkpoints, memory, usage profiles
        ctx = await edge.before(ctx, turn)
    policy = gw.settings.policy if native is None else native.policy(gw.settings.policy, model.provider)
    configured = policy
    if client is not None:
        policy = planned_policy(policy, client, gw.info(model).context_window)
    lint_after = gw.settings.policy.lint.mode != "strict"  # findings only report: made after the answer
    passes = FORWARD_PASSES if lint_after else PASSES
    # a summariser model's calls are billed to this request (summarize/billing.py); without one, none is made
    with summary_bill() if summarizer is not None else nullcontext() as bill:
        assembly, prefix = await assemble_turn(gw, opened, ctx, policy, passes, summarizer)
    await save_turn(gw, opened, ctx.session, assembly, prefix)
    edge_decisions = [  # edges after: summaries published and prepared, archives, the tools offered
        d for edge in gw.edges.ordered for d in await edge.after(turn, ctx, assembly.assembled, assembly.decisions)
    ]
    if client is not None:  # one decision naming the client's ask and the gateway's side of the plan
        window = gw.info(model).context_window
        edge_decisions.append(plan_decision(client, configured, policy, window, assembly.decisions))
    outgoing = forward_body(body, assembly)
    # None unless find_tools or recall_archive is offered; such a request crosses to chat, whose loop serves them
    served = own_tools(gw, model, turn, outgoing) if native is None or native.falls_back else None
    if native is not None and served is not None:
        native = None
    raw_out: bytes | None
    if native is not None:
        outgoing, raw_out = native.body(assembly, model)
    else:
        raw_out = request_bytes(raw, body, outgoing, assembly, model)
    decisions = (*assembly.decisions, *(bill.decisions() if bill is not None else ()), *edge_decisions)
    sent = forwarded(gw, opened, ctx.session.turn + 1, prefix, decisions, outgoing, raw, raw_out, native, route)
    count = partial(count_tokens, gw, model, assembly, lint_after)  # after the answer: not needed to forward
    flight = InFlight(gw, model, sent, started, opened.headers, count, served)
    gw.in_flight += 1  # until ``finish`` records it
    _reject_if_strict_lint(flight, assembly)
    api_key = gw.upstream.provider_key(model, principal.provider_key)  # set only in pass-through mode
    if native is not None:
        return await native.answer(flight, assembly, api_key)
    if sent.stream:
        return await stream(flight, outgoing, body, api_key, raw_out)
    return await complete(flight, outgoing, api_key, raw_out)


@dataclass(frozen=True, slots=True)
class Opened:
    """A request read, checked and named, its session's state loaded: what the edges and passes start from."""

    turn: Turn
    body: dict[str, Any]
    model: ModelConfig
    session_id: str  # the session's name, as the client is told it (inside the caller's scope: ``turn.scoped``)
    loaded: SessionState
    recognised: int  # how many of its first messages are the previous turn's objects (``ResentHistory``)
    size: int  # of the raw body, in bytes
    headers: dict[str, str]  # sent back with the answer or the error


async def open_turn(gw: Gateway, raw: bytes, caller: str, named: str | None) -> Opened:
    """Parse, check and name the request, then load its session's state (counting big new text off the loop)."""
    request_id = new_request_id()
    body, reused, model, session_id = await read_and_name(gw, raw, caller, named)
    if not named:  # two conversations that open alike and then diverge are two sessions
        session_id = await gw.conversations.name(caller, session_id, body["messages"], gw.sessions)
    scoped = scope_session(caller, session_id)  # state is the caller's own, whatever name a client sends
    recognised = gw.resent.adopt(scoped, body, len(raw), known=reused)
    loaded = await gw.sessions.load(scoped)
    await count_off_loop(gw.counter(model), body, len(raw), loaded.extra.get(BODY_BYTES_KEY))
    headers = {REQUEST_ID_HEADER: request_id, "x-ventana-session-id": session_id}
    turn = Turn(request_id, scoped, caller, body)
    return Opened(turn, body, model, session_id, loaded, recognised, len(raw), headers)


async def assemble_turn(
    gw: Gateway,
    opened: Opened,
    ctx: Context,
    policy: Policy,
    passes: tuple[PassSpec, ...],
    summarizer: Summarizer | None,
) -> tuple[Assembly, PrefixKeys]:
    """Run the passes and report the prefix. A summariser's I/O, a slow scorer, or a body so large its
    assembly takes milliseconds (~3.5 ms at 105K tokens seen for the first time): in a worker thread,
    so the loop keeps serving others."""
    tools_policy = policy.tools
    slow_scorer = tools_policy.enabled and tools_policy.scorer != "bm25"  # embedding scorers: 17-90 ms of CPU
    resent = opened.recognised >= len(opened.body["messages"]) - RESENT_NEW_MESSAGES
    big = opened.size >= (4 if resent else 1) * ASSEMBLE_OFF_LOOP_BYTES
    if (summarizer is not None and gw.edges.compaction.policy.enabled) or slow_scorer or big:
        return await asyncio.to_thread(assemble_and_track, ctx, policy, passes)
    return assemble_and_track(ctx, policy, passes)


async def save_turn(gw: Gateway, opened: Opened, before: SessionState, assembly: Assembly, prefix: PrefixKeys) -> None:
    """Save the session's state as assembled (``before``: as the edges left it, this turn's predecessor),
    merged onto whatever a concurrent turn or find_tools saved meanwhile, on any worker (sessions/merge.py)."""
    assembled = assembly.assembled.session
    extra = {**assembled.extra, BODY_BYTES_KEY: opened.size}
    saved = replace(assembled, turn=before.turn + 1, previous_prefix=prefix.keys, extra=extra)
    await gw.sessions.save(saved, base=opened.loaded)


def forwarded(
    gw: Gateway,
    opened: Opened,
    turn: int,
    prefix: PrefixKeys,
    decisions: tuple[Decision, ...],
    outgoing: dict[str, Any],
    raw: bytes,
    raw_out: bytes | None,
    native: NativeDoor | None,
    route: str,
) -> Forwarded:
    """What the record knows once the request is forwarded: who sent what, what goes upstream, and why."""
    body, model = opened.body, opened.model
    return Forwarded(
        request_id=opened.turn.request_id,
        session_id=opened.session_id,
        created_at=time.time(),
        model=model.name,
        provider=model.provider,
        caller=opened.turn.caller,
        original=body if native is None or native.original is None else native.original,
        assembled=outgoing,
        decisions=tuple(d.to_dict() for d in decisions),
        stream=bool(body.get("stream")),
        turn=turn,
        prefix_break=prefix.break_component,
        route=route,
        # a writer process parses these bytes instead of unpickling the dicts
        original_json=(raw if native is None or native.raw is None else native.raw) if gw.recorder.wants_json else None,
        assembled_json=raw_out if gw.recorder.wants_json else None,
    )


async def read_and_name(
    gw: Gateway, raw: bytes, caller: str, named: str | None
) -> tuple[dict[str, Any], int, ModelConfig, str]:
    """Parse and check the body, find its model and name its session: the body, how many of its first
    messages are a previous turn's objects, the model, the session's name (before conversations split it)."""
    if len(raw) >= ASSEMBLE_OFF_LOOP_BYTES and gw.parser.new_bytes(raw, caller) >= ASSEMBLE_OFF_LOOP_BYTES:
        # A long body mostly new to the gateway (a first turn of 105K tokens): parsing, checking,
        # naming it and finding its message ends is ~5 ms of Python holding the loop, so a worker
        # thread does it (the loop gets the GIL back every switch interval, and between C calls).
        body, model, session_id, layout = await asyncio.to_thread(read_new_body, raw, gw, caller, named)
        gw.parser.remember(raw, caller, body, 0, layout)
        return body, 0, model, session_id
    body, reused = parse_request(raw, gw.parser, caller)
    model, session_id = check_and_name(body, reused, gw, caller, named, gw.parser.vouches_tools(body))
    gw.parser.remember(raw, caller, body, reused)  # no await since parse: the entry it reused is intact
    return body, reused, model, session_id


def count_tokens(gw: Gateway, model: ModelConfig, assembly: Assembly, lint_after: bool) -> Counts:
    """The request's prompt tokens before and after assembly, its budget report and (when lint only
    reports) its lint findings: not needed to forward, so made after the answer."""
    tokens_original = assembly.original.prompt_tokens()
    same = assembly.assembled is assembly.original
    findings = lint_findings(assembly.assembled, gw.settings.policy) if lint_after else []
    prefix = track_prefix(assembly.assembled)  # the same blocks ``prefix_keys`` named before the forward
    return Counts(
        tokens_original=tokens_original,
        tokens_assembled=tokens_original if same else assembly.assembled.prompt_tokens(),
        budget=_budget(gw, model, assembly),
        findings=tuple(d.to_dict() for d in findings),
        predicted_cached_tokens=prefix.predicted_cached_tokens,
        component_tokens=prefix.component_tokens(),
    )


def request_bytes(
    raw: bytes, body: dict[str, Any], outgoing: dict[str, Any], assembly: Assembly, model: ModelConfig
) -> bytes | None:
    """The bytes sent upstream, made once for provider and store: the client's own when nothing changed,
    theirs with the added parameters spliced in, else ``outgoing`` encoded (None: the upstream encodes it)."""
    return (
        untouched_bytes(raw, body, outgoing, model.upstream_model)
        or _params_spliced(raw, body, assembly, model)
        or _encoded(outgoing, model)
    )


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


def _reject_if_strict_lint(flight: InFlight, assembly: Assembly) -> None:
    """In ``lint.mode: strict``, answer 400 naming the first violated check instead of forwarding."""
    lint = flight.gw.settings.policy.lint
    found = violations(assembly.decisions) if lint.enabled and lint.mode == "strict" else []
    if not found:
        return
    check = str(found[0].detail.get("check"))
    error = LintViolation(
        f"the assembled context failed the lint check '{check}': {found[0].reason}"
        + (f" (and {len(found) - 1} more finding(s))" if len(found) > 1 else ""),
        param=check,
    )
    finish(flight, flight.count(), status=400, error=error.message, journaled=False)
    raise error
