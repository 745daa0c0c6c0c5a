"""Replace older rounds of a long history by one summary, reusing stored summaries byte for byte.

Trigger: the request (tools + messages + generation reserve) is over
``policy.compaction.threshold`` of the model's context window. The head (system and
developer messages, the task) and the newest rounds are never touched (``compaction_layout``);
older complete rounds become ONE ``<summary ...>`` message at the place they occupied, so
a ``tool_calls`` message always leaves with its results. Hysteresis: the summary covers
enough rounds to bring the request down to ``policy.compaction.target``, not just under
the threshold, so the next compaction is many rounds away.

Checkpoints make it one summarisation per compaction, not per turn: the summary of a
range is stored in the session keyed by the hash of the range, and while the incoming
history still starts with that range the stored bytes are sent again, so the prefix the
provider sees is identical and its cache keeps hitting. A checkpoint prepared in the
background (``plan_compaction``) is picked up the same way, so the turn that crosses the
threshold does not wait for a summariser. When the reused summary no longer keeps the
request under the threshold, the previous summary and the newly aged turns fold into a
new one (hierarchical), bounded by ``summary_max_tokens``.
"""

from __future__ import annotations

import hashlib
from collections import Counter
from collections.abc import Sequence
from dataclasses import replace
from functools import lru_cache

from gateway.assembly.clear_tool_results import REWRITTEN_KEY
from gateway.assembly.compaction_layout import (
    RANGE_LIMIT,
    SUMMARY_FRAME_TOKENS,
    apply_checkpoint,
    best_application,
    choose_end,
    compaction_memory,
    for_head,
    head_end,
    layout,
    nothing_to_compact,
    original_messages,
    request_tokens,
    summary_message,
    watermarks,
    with_memory,
)
from gateway.assembly.compaction_policy import CompactionPolicy
from gateway.assembly.context import Checkpoint, Context, Decision, Message, SessionState
from gateway.assembly.place_cache_breakpoints import mark
from gateway.assembly.prefix import message_key
from gateway.assembly.sent_prefix import rebuilt_prefix
from gateway.assembly.summarize_range import RangeSummary, summarize_range
from gateway.assembly.verify_assembly import newest_round_start
from gateway.object_memo import ObjectMemo
from gateway.summarize.transcript import call_names

PASS = "compact_history"
MAX_DROPPED_LISTED = 50  # the decision lists this many dropped facts; ``dropped_count`` has them all


def _detail(cp: Checkpoint, policy: CompactionPolicy, calls: int, reused: bool) -> dict[str, object]:
    return {
        "threshold": policy.threshold,
        "target": policy.target,
        "start": cp.start,
        "end": cp.end,
        "summarizer": cp.summarizer,
        "summarizer_calls": calls,
        "reused": reused,
    }


def _rounds(messages: Sequence[Message], start: int, end: int) -> dict[str, object]:
    """Name the rounds a summary stands for: their indices, their numbers and the tools they called.

    ``round_numbers`` counts rounds from the first assistant message of the history (1-based),
    so a reader sees "rounds 3-17"; ``tool_counts`` counts the calls per tool, most first."""
    rounds = [i for i in range(start, end) if messages[i].get("role") == "assistant"]
    names = call_names(messages[start:end])
    counts = Counter(names.values())
    detail: dict[str, object] = {
        "rounds": rounds[:MAX_DROPPED_LISTED],
        "round_count": len(rounds),
        "tools": sorted(counts),
        "tool_counts": dict(sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))),
    }
    if rounds:
        first = 1 + sum(1 for m in messages[:start] if m.get("role") == "assistant")
        detail["round_numbers"] = [first, first + len(rounds) - 1]
    return detail


def _apply_stored(
    ctx: Context, cp: Checkpoint, policy: CompactionPolicy, before: int, active: bool
) -> tuple[Context, list[Decision]]:
    """Send a stored checkpoint: ``checkpoint_reused`` only when it is the one the previous turn sent.

    A checkpoint prepared ahead changes the prefix the first time it is sent, so that turn
    records ``compacted`` (with ``prepared: true`` and no summariser call), not a reuse.
    """
    applied = apply_checkpoint(ctx.messages, cp)
    after = request_tokens(ctx, applied, policy)
    if active and _forwarded_last_turn(ctx, cp):
        action = "checkpoint_reused"
        reason = "history starts with a summarised range; its stored summary is sent again byte for byte"
        detail = _detail(cp, policy, 0, True)
    elif active:  # the previous turn went out without it (e.g. reverted by the safety check)
        action = "compacted"
        reason = "the summary in use is sent again; the previous request went out without it"
        rounds = _rounds(original_messages(ctx), cp.start, cp.end)
        detail = {**_detail(cp, policy, 0, True), "resent": True, **rounds}
    else:
        action = "compacted"
        reason = f"request over {policy.threshold:.0%} of the context window; summary prepared ahead sent"
        rounds = _rounds(original_messages(ctx), cp.start, cp.end)
        detail = {**_detail(cp, policy, 0, True), "prepared": True, "prepared_ahead": True, **rounds}
    decision = Decision(PASS, action, tokens_before=before, tokens_after=after, reason=reason, detail=detail)
    out = ctx.replace(messages=applied, session=_store(ctx.session, cp, policy))
    return (out.annotate(**{REWRITTEN_KEY: True}) if action == "compacted" else out), [decision]


def _forwarded_last_turn(ctx: Context, cp: Checkpoint) -> bool:
    """Whether the session's previous request carried ``cp``'s summary message, byte for byte.

    Read from the keys of the blocks the previous request went out with (``previous_prefix``,
    kept by the API layer), plain or with the cache breakpoint Anthropic-style providers get.
    A caller that keeps no prefix (empty) leaves it to the session's memory of the active summary.
    """
    previous = ctx.session.previous_prefix
    if not previous:
        return True
    return not _SENT_KEYS.get_or(summary_message(cp), _sent_keys).isdisjoint(previous)


def _sent_keys(sent: Message) -> frozenset[str]:
    """The keys a request that carried ``sent`` has for it: plain, and with a breakpoint on it."""
    marked = mark(sent)
    return frozenset({message_key(sent), *([message_key(marked)] if marked is not None else [])})


#: Per summary message (one object per checkpoint, ``summary_message``): its keys, hashed once rather than
#: every turn of a compacted session (~40 us at a long summary). Process-wide and pure.
_SENT_KEYS: ObjectMemo[frozenset[str]] = ObjectMemo(limit=256)


def _store(state: SessionState, cp: Checkpoint, policy: CompactionPolicy) -> SessionState:
    if not policy.reuse_checkpoints:
        return state
    kept = tuple(c for c in state.checkpoints if c.range_hash != cp.range_hash)
    checkpoints = (*kept, cp)[-policy.max_checkpoints :]
    sent = with_memory(state, active=cp.range_hash, active_summary=summary_digest(cp.summary))
    return replace(state, checkpoints=checkpoints, extra=sent)


@lru_cache(maxsize=RANGE_LIMIT)  # process-wide and pure: a hash of the text alone
def summary_digest(summary: str) -> str:
    """A short hash of a summary's bytes: which text the previous turn sent, not only which range.

    Asked twice on every turn of a compacted session: remembered by the text (whose hash Python keeps)."""
    return hashlib.sha256(summary.encode()).hexdigest()[:16]


def _is_active(state: SessionState, cp: Checkpoint | None) -> bool:
    """Whether ``cp`` is what the previous turn sent: the same range *and* the same summary bytes.

    A checkpoint of the same range whose text changed (a better summary adopted for it) changes the
    prefix, so it is a new compaction, not a reuse. States saved before the digest was kept compare
    the range only."""
    memory = compaction_memory(state)
    if cp is None or cp.range_hash != memory.get("active"):
        return False
    sent = memory.get("active_summary")
    return sent is None or sent == summary_digest(cp.summary)


def _compacted(
    ctx: Context, result: RangeSummary, policy: CompactionPolicy, before: int, limit: int
) -> tuple[Context, list[Decision]]:
    cp = result.checkpoint
    applied = apply_checkpoint(ctx.messages, cp)
    after = request_tokens(ctx, applied, policy)
    decisions = []
    if result.failures:
        decisions.append(
            Decision(
                PASS,
                "summarizer_failed",
                reason="the configured summariser failed or dropped facts; the extractive summary was used",
                detail={"failures": list(result.failures), "threshold": policy.threshold},
            )
        )
    detail = {
        **_detail(cp, policy, result.calls, False),
        **_rounds(original_messages(ctx), cp.start, cp.end),
        "dropped": list(result.dropped[:MAX_DROPPED_LISTED]),
        "dropped_count": len(result.dropped),
    }
    if limit != int(policy.threshold * ctx.env.context_window):
        detail["raised_threshold_tokens"] = limit  # the head alone is past the configured threshold
    if after > limit:
        detail["still_over"] = True
    decisions.append(
        Decision(
            PASS,
            "compacted",
            tokens_before=before,
            tokens_after=after,
            reason=f"request over {policy.threshold:.0%} of the context window; older rounds replaced by a summary",
            detail=detail,
        )
    )
    out = ctx.replace(messages=applied, session=_store(ctx.session, cp, policy))
    return out.annotate(**{REWRITTEN_KEY: True}), decisions


def compact_history(ctx: Context, policy: CompactionPolicy) -> tuple[Context, list[Decision]]:
    """Replace older rounds by one summary once the request passes the threshold, down to the target."""
    if "summarize" not in policy.strategies or nothing_to_compact(ctx, policy, policy.threshold):
        return ctx, []
    originals = original_messages(ctx)
    lay = layout(originals, policy, ctx.env.counter)
    if lay is None or not lay.has_middle:
        return ctx, []
    policy = for_head(ctx, lay, policy)
    marks = watermarks(ctx, lay, policy)
    limit = marks.threshold
    before = request_tokens(ctx, ctx.messages, policy)
    cp, applied = best_application(ctx, originals, lay, policy)
    active = _is_active(ctx.session, cp)
    if cp is None and before <= limit:
        return ctx, []
    fits = cp is not None and request_tokens(ctx, applied, policy) <= limit
    if cp is not None and (active and fits):
        return _apply_stored(ctx, cp, policy, before, active=True)
    # A checkpoint prepared ahead was planned to land at the target once the history reached the
    # threshold. It cannot when the rounds that aged after it was prepared are more than the room
    # below the target (clearing delayed the crossing, or what compaction keeps fills the target):
    # then it is extended by those rounds, else the next compaction would come before the history
    # grew by the whole target-to-threshold band.
    planned = cp is not None and request_tokens(ctx, applied, policy) <= marks.target
    end = choose_end(ctx, lay, policy, marks.target, floor=cp.end if cp is not None else 0)
    if cp is not None and (planned or cp.end >= end):
        return _apply_stored(ctx, cp, policy, before, active=active)
    sent = rebuilt_prefix(ctx, originals, lay.head_end, end, cp, active, policy)
    result = summarize_range(originals, lay.head_end, end, cp, ctx.env.summarizer, policy, ctx.env.counter, sent=sent)
    return _compacted(ctx, result, policy, before, limit)


def fit_newest(ctx: Context, policy: CompactionPolicy, reserve: int = 0) -> tuple[Context, list[Decision]] | None:
    """The last plan before a refusal: head, ONE summary of everything up to the newest round, the newest round.

    Used by ``pipeline.assemble`` only when no stage of the regular plan fits the window (the tail's
    older rounds hold results ``never_clear`` keeps, or the tail is larger than the window): the rule
    is that a request is refused only when the system prompt, the task and the newest round cannot
    fit together. The summary is extractive (no model call, bounded by the room left) and is not
    stored as a checkpoint: the next turn plans afresh. None when even a minimal summary cannot fit.
    ``reserve`` leaves that many tokens free for what the finishing passes add (the reminder).
    """
    messages = ctx.messages
    head = head_end(messages)
    newest = newest_round_start(messages)
    if newest <= head:
        return None
    counter, window = ctx.env.counter, ctx.env.context_window
    kept = counter.request((*messages[:head], *messages[newest:]), ctx.tools)
    room = window - kept - SUMMARY_FRAME_TOKENS - reserve
    if room < MIN_FIT_SUMMARY_TOKENS:
        return None
    budget = min(policy.summary_max_tokens, room)
    bounded = policy.model_copy(
        update={
            "summary_max_tokens": budget,
            "summarizer_input_tokens": max(budget + 1, policy.summarizer_input_tokens),
        }
    )
    rules = tuple(m for m in messages[head:newest] if m.get("role") in ("system", "developer"))
    if rules:  # mid-conversation instructions are the client's rules, never summarised: kept after the summary
        left = room - counter.messages(rules)
        if left < MIN_FIT_SUMMARY_TOKENS:
            return None
        budget = min(budget, left)
        bounded = bounded.model_copy(update={"summary_max_tokens": budget})
    result = summarize_range(messages, head, newest, None, None, bounded, counter)
    applied = apply_checkpoint(messages, result.checkpoint)
    if rules:
        at = head + 1  # right after the summary, in their order
        applied = (*applied[:at], *rules, *applied[at:])
    detail = {
        **_detail(result.checkpoint, policy, 0, False),
        **_rounds(messages, head, newest),
        "fit_newest": True,
        "dropped_count": len(result.dropped),
    }
    decision = Decision(
        PASS,
        "compacted",
        tokens_before=request_tokens(ctx, messages, policy),
        tokens_after=request_tokens(ctx, applied, policy),
        reason="no other plan fits the window: everything before the newest round summarised (extractive)",
        detail=detail,
    )
    return ctx.replace(messages=applied), [decision]


#: A summary smaller than this says too little to be worth sending instead of a refusal.
MIN_FIT_SUMMARY_TOKENS = 48
