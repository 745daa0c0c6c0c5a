"""Clear old tool results to one-line stubs before any summarising (cheaper first).

When the request (tools + messages + generation reserve) is over
``policy.compaction.threshold`` of the context window, even after reusing a stored
summary, the oldest tool results of the middle of the history (older rounds, see
``compaction_layout``) become ``[result of read_file {"path": "a.py"} cleared: 4,210 tokens]``:
the tool, its arguments and the size removed, in the manner of Anthropic's
``clear_tool_uses``. The ``tool`` message stays, with its ``tool_call_id``, so every call
keeps its result. Tools named in ``never_clear`` keep their results. With ``clear_tool_inputs``
the cleared calls' arguments are stubbed too (``input_stubs``); the call keeps its id and name. Clearing goes down
to ``target``, so it happens in batches rather than a little every turn,
and not at all when even clearing everything would leave the request over the threshold
while summarising is enabled (the summary replaces those results anyway),
and what was cleared stays cleared on later turns (sticky, by ``tool_call_id``) so the
prefix does not change back and forth. The originals are kept in the Context's
annotations: a later summary is written from them, so cleared facts are not lost.

Never touches the head (system/developer messages, the task) or the newest round
(``verify_assembly.newest_round_start``, the one definition of what stays verbatim). The older
rounds of the protected tail are cleared here only after the whole middle (oldest first) and
only when no summary would do (summarising off, or the middle once cleared smaller than a
summary and no summary in use that, folded with it, lands at the target): while a summary of
the middle can do better, the kept rounds wait for it, whether or not it was prepared ahead.
``condense_tail`` (after ``compact_history``) clears them when a summary alone cannot bring the
request down to the target: so a compaction lands at its target even when the newest
``keep_recent_rounds`` rounds are large next to the window.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from gateway.assembly.compaction_layout import (
    ORIGINALS_KEY,
    SUMMARY_FRAME_TOKENS,
    Layout,
    best_application,
    choose_end,
    compaction_memory,
    for_head,
    layout,
    nothing_to_compact,
    original_messages,
    request_tokens,
    summary_message,
    watermarks,
    with_memory,
)
from gateway.assembly.compaction_policy import CompactionPolicy
from gateway.assembly.condense_reasoning import client_message, condensable, condensed_reasoning, has_long_arguments
from gateway.assembly.context import Checkpoint, Context, Decision, Message
from gateway.assembly.input_stubs import input_saving, with_inputs_cleared
from gateway.assembly.verify_assembly import is_gateway_block, last_client_user, newest_round_start, shrunk_digest
from gateway.object_memo import ObjectMemo
from gateway.summarize.facts import extract_facts
from gateway.tokens import content_text

PASS = "clear_tool_results"


STUB_ARGUMENTS_CHARS = 160  # a stub repeats at most this much of the call's arguments
STUB_FACTS_CHARS = 160  # and this much of the result's facts (paths, ids, numbers)
STUB_ERROR_CHARS = 120  # and of its last error line
_ERROR_WORD = re.compile(r"\b(?:\w*Error|\w*Exception|Traceback|error|failed|FAILED)\b")


def _clip(text: str, limit: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def stub(tool: str, tokens: int, arguments: str = "", result: str = "") -> str:
    """The line a cleared result becomes: what was called, what it cost, and what it said in short.

    The facts (paths, ids, numbers; words with digits first) and the first error line of
    the result stay, so an agent does not redo a lookup to recover an id it already had.
    """
    args = _clip(arguments, STUB_ARGUMENTS_CHARS)
    called = f"{tool} {args}" if args and args != "{}" else tool
    extra = ""
    facts = sorted(extract_facts(result), key=lambda f: f.replace(",", "").replace(".", "").isdigit())
    kept: list[str] = []
    for fact in facts:
        if sum(len(k) + 2 for k in kept) + len(fact) > STUB_FACTS_CHARS:
            break
        kept.append(fact)
    if kept:
        extra += "; facts: " + ", ".join(kept)
    errors = [line for line in result.splitlines() if _ERROR_WORD.search(line)]
    if errors:  # the last one: a traceback ends with the exception
        extra += "; error: " + _clip(errors[-1], STUB_ERROR_CHARS)
    return f"[result of {called} cleared: {tokens:,} tokens{extra}]"


@dataclass(frozen=True, slots=True)
class _Call:
    name: str
    arguments: str


#: What a result whose call is not in the history was made by.
_UNKNOWN_CALL = _Call("tool", "")


def _message_calls(message: Message) -> dict[str, _Call]:
    out: dict[str, _Call] = {}
    for call in message.get("tool_calls") or ():
        fn = call.get("function") if isinstance(call, Mapping) else None
        if isinstance(fn, Mapping):
            out[str(call.get("id"))] = _Call(str(fn.get("name") or "tool"), str(fn.get("arguments") or ""))
    return out


def calls_by_id(messages: Sequence[Message], memo: ObjectMemo[dict[str, _Call]]) -> dict[str, _Call]:
    """``tool_call_id -> the call`` for every call in ``messages``, built once per run.

    ``memo`` (the gateway's ``memos.tool_calls``) holds each assistant message's calls: a
    resent history is last turn's objects."""
    out: dict[str, _Call] = {}
    get_or = memo.get_or
    for m in messages:
        if m.get("tool_calls"):  # a condensed call is read as the client wrote it: its stubs do not change
            out.update(get_or(client_message(m), _message_calls))
    return out


def _candidates(ctx: Context, lay: Layout, start: int, policy: CompactionPolicy, stubs: _Stubs) -> list[int]:
    """Indices of clearable tool results before the newest round, oldest first (``never_clear`` left out).

    The middle comes first, then the older rounds of the tail: oldest first, the tail is cleared only
    once the middle is.

    A result is worth clearing from ``clear_min_tokens``; with ``clear_tool_inputs``, so is a
    short result whose call's arguments save that much (a ``write_file`` answered by one line)."""
    out = []
    counter, messages, memo = ctx.env.counter, ctx.messages, ctx.env.memos.result_tokens
    least = max(policy.clear_min_tokens, 1)
    keep = set(policy.never_clear)
    kept = newest_results(messages, policy.keep_tool_results)
    loop_start = max(lay.tail_start, last_client_user(messages))  # the tail is cleared only inside the current loop
    for i in range(start, newest_round_start(messages)):
        if lay.tail_start <= i < loop_start:
            continue
        m = messages[i]
        if m.get("role") != "tool" or stubs.tool(i) in keep or i in kept:
            continue
        large = _result_tokens(m, counter, memo) >= least or stubs.total_saving(i) - stubs.saving(i) >= least
        if large and stubs.total_saving(i) > 0:
            out.append(i)
    return out


def newest_results(messages: Sequence[Message], n: int) -> set[int]:
    """Indices of the newest ``n`` tool results: a client's ``keep`` (``assembly/client_plan.py``), never cleared."""
    if n <= 0:
        return set()
    return set([i for i, m in enumerate(messages) if m.get("role") == "tool"][-n:])


def _result_tokens(m: Message, counter: Any, memo: ObjectMemo[tuple[str, int]]) -> int:
    """Tokens of a tool result's text (-1 for a stub already); ``memo`` (the gateway's
    ``memos.result_tokens``) keeps them with the encoding they were counted in."""
    found = memo.get(m)
    if found is not None and found[0] == counter.encoding_name:
        return found[1]
    text = content_text(m.get("content"))[0]
    tokens = -1 if text.startswith("[result of ") else counter.text(text)
    return memo.put(m, (counter.encoding_name, tokens))[1]


def _choose(ctx: Context, lay: Layout, policy: CompactionPolicy, sticky: set[str], stubs: _Stubs) -> list[int]:
    """Sticky results first; then more, oldest first, while over the threshold, down to ``target``.

    A batch that cannot reach the target is not made while summarising is on: it would land
    between target and threshold, so another rewrite (a second batch or the summary) would
    follow a few rounds later. The summary then goes down to the target on its own, in one rewrite.
    """
    cp, applied = best_application(ctx, original_messages(ctx), lay, policy)
    before = request_tokens(ctx, applied, policy)
    marks = watermarks(ctx, lay, policy)
    if not sticky and before <= marks.threshold:
        return []  # the common case, decided before looking at every tool result
    start = cp.end if cp is not None else lay.head_end  # results before it are summarised away
    candidates = _candidates(ctx, lay, start, policy, stubs)
    chosen = [i for i in candidates if str(ctx.messages[i].get("tool_call_id")) in sticky]
    sticky_at = set(chosen)
    tokens = before - sum(stubs.total_saving(i) for i in chosen)
    if tokens <= marks.threshold:
        return chosen
    target = marks.target
    tokens = _clear_oldest([i for i in candidates if i < lay.tail_start], chosen, tokens, target, stubs)
    if tokens <= target:
        return sorted(chosen)
    # The middle cleared is not enough. A summary of the middle comes before any kept round: else the
    # plan depended on whether a summary prepared ahead was ready (a slow preparation cleared kept rounds).
    if "summarize" in policy.strategies and _summary_saves(ctx, lay, cp, chosen, stubs, policy, tokens - target):
        return _after_summary(ctx, lay, policy, cp, sorted(sticky_at), stubs, target)
    _clear_oldest([i for i in candidates if i >= lay.tail_start], chosen, tokens, target, stubs)
    return sorted(chosen)


def _clear_oldest(candidates: Sequence[int], chosen: list[int], tokens: int, target: int, stubs: _Stubs) -> int:
    """Add ``candidates`` to ``chosen``, oldest first, until the request is down to ``target``; its tokens then."""
    taken = set(chosen)
    for i in candidates:
        if tokens <= target:
            break
        if i not in taken:
            chosen.append(i)
            tokens -= stubs.total_saving(i)
    return tokens


def _summary_saves(
    ctx: Context,
    lay: Layout,
    cp: Checkpoint | None,
    chosen: Sequence[int],
    stubs: _Stubs,
    policy: CompactionPolicy,
    over: int,
) -> bool:
    """Whether a summary of the middle beats clearing the tail's older rounds: else clearing is the plan.

    Once the middle's results are cleared, what remains of it (calls and stubs) may already be
    smaller than a summary (``summary_max_tokens``): a loop whose newest round alone is near the
    target then stays in budget by clearing, with no summariser call, rather than summarising
    every few rounds for nothing (issue 34). But when a summary is in use, the next one folds it
    with the middle: if that alone lands at the target (``over``: tokens past it), the kept rounds
    stay whole, as they do on the turn that finds that summary prepared ahead.
    """
    counter = ctx.env.counter
    start = cp.end if cp is not None else lay.head_end
    middle = counter.messages(ctx.messages[start : lay.tail_start])
    middle -= sum(stubs.total_saving(i) for i in chosen if i < lay.tail_start)
    summary = policy.summary_max_tokens + SUMMARY_FRAME_TOKENS
    if middle > summary:
        return True
    folded = counter.message(summary_message(cp)) if cp is not None else 0
    return middle + folded - summary >= over


def _after_summary(
    ctx: Context,
    lay: Layout,
    policy: CompactionPolicy,
    cp: Checkpoint | None,
    sticky: list[int],
    stubs: _Stubs,
    target: int,
) -> list[int]:
    """The sticky stubs the coming summary leaves in place: those past where ``compact_history`` will end it.

    It ends the summary with ``choose_end`` on the request as cleared here; the results before
    that end are summarised (from their originals), so they are not cleared in the same request.
    """
    if not sticky:
        return []
    messages = list(ctx.messages)
    for i in sticky:
        messages[i] = stubs.get(i)
    end = choose_end(ctx.replace(messages=tuple(messages)), lay, policy, target, floor=cp.end if cp is not None else 0)
    return [i for i in sticky if i >= end]


class _Stubs:
    """The stub of each tool result and what it saves, made once per pass run: it is priced, then written.

    The gateway's ``memos.stubs`` keeps each tool-result object's stub with the tool, arguments and
    encoding it was made with, and the tokens it saves in that encoding. A resent history is last
    turn's objects (``gateway.sessions.resent``), so a stub is made and priced once.
    """

    def __init__(self, ctx: Context, inputs: bool = False, inputs_before: int | None = None) -> None:
        self._ctx = ctx
        self._calls: dict[str, _Call] | None = None  # found on first use: most runs clear nothing
        self._made: dict[int, tuple[Message, int]] = {}
        self._inputs = inputs  # policy.compaction.clear_tool_inputs
        #: Call arguments are stubbed only before this index (the tail's calls stay verbatim).
        self._inputs_before = len(ctx.messages) if inputs_before is None else inputs_before

    def call(self, i: int) -> _Call:
        if self._calls is None:  # once per run: looking calls up per stub was O(n^2)
            self._calls = calls_by_id(self._ctx.messages, self._ctx.env.memos.tool_calls)
        return self._calls.get(str(self._ctx.messages[i].get("tool_call_id")), _UNKNOWN_CALL)

    def tool(self, i: int) -> str:
        return self.call(i).name

    def get(self, i: int) -> Message:
        return self._stub(i)[0]

    def saving(self, i: int) -> int:
        """Exact tokens saved by clearing message ``i`` (the stub as it will be written)."""
        return self._stub(i)[1]

    def _stub(self, i: int) -> tuple[Message, int]:
        found = self._made.get(i)
        if found is None:
            m = self._ctx.messages[i]
            call = self.call(i)
            counter = self._ctx.env.counter
            made_by = (call.name, call.arguments, counter.encoding_name)
            memo = self._ctx.env.memos.stubs
            last = memo.get(m)
            if last is not None and last[0] == made_by:
                found = (last[1], last[2])  # last turn's stub object: its count and hash are remembered too
            else:
                text = content_text(m.get("content"))[0]
                stub_message = {**m, "content": stub(call.name, counter.text(text), call.arguments, text)}
                found = (stub_message, counter.message(m) - counter.message(stub_message))
                memo.put(m, (made_by, *found))
            self._made[i] = found
        return found

    def total_saving(self, i: int) -> int:
        """Tokens saved by clearing result ``i`` and, with ``clear_tool_inputs``, its call's arguments."""
        if not self._inputs or i >= self._inputs_before:
            return self.saving(i)
        return self.saving(i) + input_saving(self.call(i).arguments, self._ctx.env.counter)


def _round_of(messages: Sequence[Message], i: int) -> int:
    """Index of the assistant message whose call tool result ``i`` answers."""
    while i > 0 and messages[i].get("role") == "tool":
        i -= 1
    return i


def _decision(ctx: Context, i: int, stubs: _Stubs, reason: str, threshold: float, inputs: bool) -> Decision:
    """The ``cleared`` decision of result ``i``, built from this run's data (counts are memoised per object)."""
    before = ctx.env.counter.message(ctx.messages[i])
    detail = {
        "tool": stubs.tool(i),
        "message_index": i,
        "round": _round_of(ctx.messages, i),
        "tool_call_id": str(ctx.messages[i].get("tool_call_id")),
        "threshold": threshold,
        **({"input_cleared": True} if inputs else {}),
    }
    return Decision(PASS, "cleared", before, before - stubs.saving(i), reason, detail)


def clear_tool_results(ctx: Context, policy: CompactionPolicy) -> tuple[Context, list[Decision]]:
    """Replace old tool results by stubs while the request is over the threshold; keep every pair."""
    state = ctx.session
    if "clear_tool_results" not in policy.strategies or nothing_to_compact(ctx, policy, policy.threshold):
        return ctx, []
    lay = layout(ctx.messages, policy, ctx.env.counter)
    if lay is None:
        return ctx, []
    policy = for_head(ctx, lay, policy)
    ctx, condensed = _reapply_reasoning(ctx, lay, frozenset(policy.never_clear))
    sticky = {str(x) for x in compaction_memory(state).get("cleared", ())}
    stubs = _Stubs(ctx, inputs=policy.clear_tool_inputs, inputs_before=lay.tail_start)
    chosen = _choose(ctx, lay, policy, sticky, stubs)
    if not chosen:
        return ctx, condensed
    out, decisions = _apply(ctx, policy, sticky, stubs, chosen, inputs_before=lay.tail_start)
    if any(str(ctx.messages[i].get("tool_call_id")) not in sticky for i in chosen):
        out = out.annotate(**{REWRITTEN_KEY: True})  # a new batch: condense_tail lands it at the target
    return out, [*condensed, *decisions]


def _reapply_reasoning(ctx: Context, lay: Layout, keep: frozenset[str]) -> tuple[Context, list[Decision]]:
    """The messages ``condense_tail`` condensed on earlier turns, condensed again before anything is planned.

    Sticky like cleared results, and early for the same reason: ``compact_history`` judges the request
    as it will go out, so a condensed message counted whole made it compact again on the next turns
    (mini-swe-agent at 6K: four turns in a row, each landing far under the threshold). The originals go
    to the annotations, so a summary is written from them and range hashes stay the client's."""
    memory = _condensed_memory(ctx.session)
    if not memory.reasoning and not memory.inputs:
        return ctx, []
    found: dict[int, _Condensed] = {}
    counter = ctx.env.counter
    for i in range(lay.head_end, newest_round_start(ctx.messages)):
        m = ctx.messages[i]
        if m.get("role") != "assistant" or condensed_reasoning(m, counter, arguments=True, keep=keep) is None:
            continue  # the common case, decided without a digest
        digest = shrunk_digest(m)
        text, inputs = digest in memory.reasoning, digest in memory.inputs
        made = condensed_reasoning(m, counter, reasoning=text, arguments=inputs, keep=keep) if text or inputs else None
        if made is not None:
            found[i] = _Condensed(made, text, inputs)
    out, decisions = _condense_reasoning(ctx, ctx, found, _Memory())  # those summarised away drop out of the memory
    if found:
        originals = {**(ctx.annotations.get(ORIGINALS_KEY) or {}), **{i: ctx.messages[i] for i in found}}
        out = out.annotate(**{ORIGINALS_KEY: originals})
    return out, decisions


@dataclass(frozen=True, slots=True)
class _Memory:
    """Digests of the client's assistant messages condensed on earlier turns: their text, their call arguments."""

    reasoning: frozenset[str] = frozenset()
    inputs: frozenset[str] = frozenset()


def _condensed_memory(state: Any) -> _Memory:
    memory = compaction_memory(state)
    return _Memory(
        frozenset(str(x) for x in memory.get("condensed", ())), frozenset(str(x) for x in memory.get("inputs", ()))
    )


@dataclass(frozen=True, slots=True)
class _Condensed:
    """What an assistant message becomes, and which of its parts were condensed (each remembered apart)."""

    message: Message
    reasoning: bool
    inputs: bool


def _apply(
    ctx: Context,
    policy: CompactionPolicy,
    sticky: set[str],
    stubs: _Stubs,
    chosen: Sequence[int],
    *,
    inputs_before: int = 0,
    tail: bool = False,
) -> tuple[Context, list[Decision]]:
    """Write the stubs of ``chosen``, their ``cleared`` decisions, and remember them (sticky)."""
    messages: list[Message] = list(ctx.messages)
    for i in chosen:
        messages[i] = stubs.get(i)
    # Call arguments are stubbed in the middle only: the tail's assistant messages stay verbatim.
    early = [i for i in chosen if i < inputs_before]
    rounds = _clear_inputs(ctx, messages, early) if policy.clear_tool_inputs and early else set()
    reason = f"request over {policy.threshold:.0%} of the context window; old tool result cleared"
    if tail:
        reason = "the summary alone left the request over the target; a result of an older round of the tail cleared"
    decisions = [
        _decision(ctx, i, stubs, reason, policy.threshold, _round_of(ctx.messages, i) in rounds) for i in chosen
    ]
    if tail:
        decisions = [replace(d, detail={**d.detail, "tail": True}) for d in decisions]
    present = {str(m.get("tool_call_id")) for m in ctx.messages if m.get("role") == "tool"}
    cleared = sorted((sticky & present) | {str(ctx.messages[i].get("tool_call_id")) for i in chosen})
    session = replace(ctx.session, extra=with_memory(ctx.session, cleared=cleared))
    out = ctx.replace(messages=tuple(messages), session=session)
    if not tail:  # after a summary the indices are no longer the client's: originals are read from before it
        changed = [*chosen, *rounds]
        originals = {**(ctx.annotations.get(ORIGINALS_KEY) or {}), **{i: ctx.messages[i] for i in changed}}
        out = out.annotate(**{ORIGINALS_KEY: originals})
    return out, decisions


#: Annotation set by a pass that rewrote the history this turn (a clearing batch, a new summary):
#: ``condense_tail`` then takes the request down to the target in the same rewrite.
REWRITTEN_KEY = "compaction_rewritten"


def condense_tail(ctx: Context, policy: CompactionPolicy) -> tuple[Context, list[Decision]]:
    """After a summary: condense the tail's older rounds, oldest first, down to the target.

    Runs when the request is still over the threshold, or when this turn compacted (a summary or a
    clearing batch) and landed above the target: the newest ``keep_recent_rounds`` rounds kept whole
    whatever their size left a compaction at ~48 % of a 16K window, so the next came 1-2 requests
    later. An older round of the tail loses its results (stubs), its long reasoning (its edges kept) and
    its long call arguments (``condense_reasoning``: ids and names kept, the first characters and the size).
    The newest round's calls and results are never touched here (``shrink_oversize`` condenses its result
    only when it alone exceeds its share); its reasoning is condensed only when the round alone is past
    ``NEWEST_ROUND_SHARE`` of the window and the request is still over the target with the rest condensed.
    What was condensed stays so (sticky), so the prefix stays stable.
    """
    if "clear_tool_results" not in policy.strategies or nothing_to_compact(ctx, policy, policy.target):
        return ctx, []
    lay = layout(ctx.messages, policy, ctx.env.counter)
    if lay is None:
        return ctx, []
    policy = for_head(ctx, lay, policy)
    marks = watermarks(ctx, lay, policy)
    tokens = request_tokens(ctx, ctx.messages, policy)
    sticky = {str(x) for x in compaction_memory(ctx.session).get("cleared", ())}
    active = tokens > marks.threshold or (tokens > marks.target and bool(ctx.annotations.get(REWRITTEN_KEY)))
    before = _condensed_memory(ctx.session)
    if not active and not sticky and not before.reasoning and not before.inputs:
        return ctx, []
    stubs = _Stubs(ctx, inputs=False)
    keep = set(policy.never_clear)
    kept = newest_results(ctx.messages, policy.keep_tool_results)
    least = max(policy.clear_min_tokens, 1)
    counter, memo = ctx.env.counter, ctx.env.memos.result_tokens
    chosen: list[int] = []
    reasoning: dict[int, _Condensed] = {}  # assistant messages condensed, with what they become
    # The tail's arguments go only where the middle's go too (stubbed, or summarised away): a tail condensed
    # harder than the middle before it would lose the newer calls first.
    inputs = policy.clear_tool_inputs or "summarize" in policy.strategies
    loop_start = max(lay.tail_start, last_client_user(ctx.messages))
    newest = newest_round_start(ctx.messages)
    for i in range(lay.head_end, newest):
        if lay.tail_start <= i < loop_start:
            continue  # a user turn the tail keeps: only the rounds of the current loop are condensed
        m = ctx.messages[i]
        if m.get("role") == "assistant":
            # An older round's reasoning and long arguments, oldest first with the results: condensed once,
            # then on every turn (sticky by digest, so the prefix does not change back); ids and names stay.
            fresh = active and tokens > marks.target and i >= lay.tail_start
            made = _condensed_message(m, counter, before, fresh=fresh, keep=frozenset(keep), inputs=inputs)
            if made is not None:
                reasoning[i] = made
                tokens -= counter.message(m) - counter.message(made.message)
            continue
        if m.get("role") != "tool" or is_gateway_block(m) or stubs.tool(i) in keep or i in kept or stubs.saving(i) <= 0:
            continue
        # A result cleared on an earlier turn stays cleared (before: a tail result cleared after a summary
        # came back whole on the next turn that did not compact, a rewrite of the prefix for nothing).
        again = str(m.get("tool_call_id")) in sticky
        if again or (active and tokens > marks.target and _result_tokens(m, counter, memo) >= least):
            chosen.append(i)
            tokens -= stubs.saving(i)
    if active and tokens > marks.target:
        made = _condensed_newest(ctx, newest)
        if made is not None:
            reasoning[newest] = made
    if not chosen and not reasoning:
        return ctx, []
    out, decisions = _apply(ctx, policy, sticky, stubs, chosen, tail=True) if chosen else (ctx, [])
    if reasoning:
        out, more = _condense_reasoning(ctx, out, reasoning, before)
        decisions = [*decisions, *more]
    return out, decisions


#: The newest round's reasoning is condensed only when the round alone is past this share of the window:
#: the share the issue gives the newest result before it is condensed (``shrink_oversize``).
NEWEST_ROUND_SHARE = 0.25


def _condensed_message(
    m: Message, counter: Any, before: _Memory, *, fresh: bool, keep: frozenset[str], inputs: bool
) -> _Condensed | None:
    """What an older round's assistant message ``m`` becomes: the parts condensed on earlier turns, and with
    ``fresh`` whatever is long; None when it stays as it is (or is already what it would become)."""
    original = client_message(m)  # a message reapplied this turn is read as the client wrote it
    if condensed_reasoning(original, counter, arguments=True, keep=keep) is None:
        return None  # nothing long in it: the common case, decided without a digest
    digest = shrunk_digest(original)
    text = digest in before.reasoning or (fresh and condensable(original, counter))
    stub = digest in before.inputs or (fresh and inputs and has_long_arguments(original, counter, keep))
    if not text and not stub:
        return None
    made = condensed_reasoning(original, counter, reasoning=text, arguments=stub, keep=keep)
    if made is None or made is m:
        return None
    return _Condensed(made, text, stub)


def _condensed_newest(ctx: Context, newest: int) -> _Condensed | None:
    """The newest round's assistant message with its reasoning condensed, its calls verbatim, when the round
    alone is past ``NEWEST_ROUND_SHARE`` of the window (mini-swe-agent at 6K: 1.1-1.9K tokens a round
    behind a 1.4K task, so no compaction could land a band under the threshold)."""
    messages, counter = ctx.messages, ctx.env.counter
    if newest < 0 or messages[newest].get("role") != "assistant":
        return None
    if counter.messages(messages[newest:]) <= NEWEST_ROUND_SHARE * ctx.env.context_window:
        return None
    made = condensed_reasoning(messages[newest], counter)
    return _Condensed(made, True, False) if made is not None else None


def _condense_reasoning(
    ctx: Context, out: Context, condensed: Mapping[int, _Condensed], kept: _Memory
) -> tuple[Context, list[Decision]]:
    """Write the condensed assistant messages into ``out``, their ``condensed`` decisions, and remember them.

    Each decision names the client's message by digest (``shrunk_digest``), which is how ``verify_assembly``
    accepts a condensed form of the same role and calls in its place. ``kept``: the digests remembered besides
    these."""
    messages = list(out.messages)
    decisions = []
    counter = ctx.env.counter
    reasoning, inputs = set(kept.reasoning), set(kept.inputs)
    for i, made in sorted(condensed.items()):
        messages[i] = made.message
        original = client_message(ctx.messages[i])
        digest = shrunk_digest(original)
        if made.reasoning:
            reasoning.add(digest)
        if made.inputs:
            inputs.add(digest)
        detail = {
            "message_index": i,
            "round": i,
            "role": "assistant",
            "shrunk_digest": digest,
            "tail": True,
            **({"input_cleared": True} if made.inputs else {}),
        }
        reason = "the summary alone left the request over the target; the reasoning of an older round condensed"
        if made.inputs:
            reason = "the summary alone left the request over the target; an older round's long arguments stubbed"
        before_tokens = counter.message(original)
        decisions.append(Decision(PASS, "condensed", before_tokens, counter.message(made.message), reason, detail))
    session = replace(out.session, extra=with_memory(out.session, condensed=sorted(reasoning), inputs=sorted(inputs)))
    return out.replace(messages=tuple(messages), session=session), decisions


def _clear_inputs(ctx: Context, messages: list[Message], chosen: Sequence[int]) -> set[int]:
    """Stub the arguments of the calls whose results are cleared; the indices of the rounds rewritten."""
    by_round: dict[int, set[str]] = {}
    for i in chosen:
        by_round.setdefault(_round_of(ctx.messages, i), set()).add(str(ctx.messages[i].get("tool_call_id")))
    rounds = set()
    for r, ids in by_round.items():
        made = with_inputs_cleared(ctx.messages[r], frozenset(ids), ctx.env.counter, ctx.env.memos.cleared_inputs)
        if made is not ctx.messages[r]:
            messages[r] = made
            rounds.add(r)
    return rounds
