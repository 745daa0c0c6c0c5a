"""Plan the next summary ahead of time, so the turn that crosses the threshold does not wait.

Once the assembled request passes ``prepare_at`` (the lower watermark) but is still under
the threshold, the range that the next compaction will replace is already known: from
the end of the head through enough older rounds that, once the history has grown by the
``threshold - prepare_at`` still to come, the request lands at ``target``. ``plan_compaction`` names it (pure);
the API layer runs ``summarize_range`` on it in a background thread and stores the
resulting checkpoint in the session. ``compact_history`` then finds it like any other
checkpoint when the threshold is crossed.

A summary prepared for a threshold the session never crosses is an upstream call that buys
nothing (tau2's solo session ended between the watermarks with one LLM summary never sent, and
cost more than sending the client's requests directly). So past ``prepare_at`` a summary is
prepared only once twice the newest exchange's growth would cross the threshold: the turn that
crosses finds it ready, and a session that stops short of it pays for none.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from gateway.assembly.compaction_layout import (
    Layout,
    choose_end,
    compaction_memory,
    for_head,
    layout,
    matching_checkpoints,
    original_messages,
    range_hash,
    request_tokens,
    token_limit,
    tokens_within,
    watermarks,
)
from gateway.assembly.compaction_policy import CompactionPolicy, for_window
from gateway.assembly.context import Checkpoint, Context, Message, SessionState, Summarizer
from gateway.assembly.sent_prefix import continuing, sent_prefix
from gateway.assembly.summarize_range import RangeSummary, summarize_range
from gateway.assembly.verify_assembly import is_gateway_block


@dataclass(frozen=True, slots=True)
class CompactionPlan:
    """Summarise ``messages[start:end]`` continuing ``previous``; ``key`` names the range."""

    messages: tuple[Message, ...]
    start: int
    end: int
    previous: Checkpoint | None
    key: str


def plan_compaction(original: Context, assembled: Context, policy: CompactionPolicy) -> CompactionPlan | None:
    """Return the next checkpoint to prepare, or None when nothing needs preparing yet."""
    if not policy.enabled or "summarize" not in policy.strategies or not policy.reuse_checkpoints:
        return None
    if tokens_within(assembled, policy, token_limit(assembled, policy.prepare_at)):
        return None  # the common case, decided before reading the layout (a raised watermark is only higher)
    tokens = request_tokens(assembled, assembled.messages, policy)
    messages = original_messages(original)
    lay = layout(messages, policy, original.env.counter)
    if lay is None or not lay.has_middle:
        return None
    policy = for_head(original, lay, policy)
    marks = watermarks(original, lay, policy)
    if not marks.prepare < tokens <= marks.threshold:
        return None
    if tokens + 2 * _growth(original) <= marks.threshold:
        return None  # the next turns stay under the threshold: prepared now it may never be sent
    found = matching_checkpoints(messages, lay, assembled.session)
    previous = found[-1] if found else None
    if previous is not None and previous.range_hash != compaction_memory(assembled.session).get("active"):
        return None  # a prepared checkpoint is already waiting: one preparation per compaction
    aim = max(marks.target - (marks.threshold - marks.prepare), 1)  # lands at target once grown to the threshold
    end = choose_end(original, lay, policy, aim, floor=previous.end if previous is not None else 0)
    if previous is not None and previous.end >= end:
        return None  # nothing aged since the summary in use
    key = range_hash(messages[lay.head_end : end])
    return CompactionPlan(messages, lay.head_end, end, previous, key)


def prepare(
    plan: CompactionPlan, ctx: Context, policy: CompactionPolicy, summarizer: Summarizer | None
) -> RangeSummary:
    """The checkpoint ``plan`` names, summarised as the gateway prepares it ahead (in a background thread)."""
    sized = for_window(policy, ctx.env.context_window)  # the summary's ceiling follows the window
    sized = for_head(ctx, Layout(plan.start, plan.end), sized)  # and the room the head leaves, as planned
    sent = sent_prefix(ctx, plan.messages, plan.start, plan.end, plan.previous) if continuing(summarizer) else None
    return summarize_range(
        plan.messages, plan.start, plan.end, plan.previous, summarizer, sized, ctx.env.counter, sent=sent
    )


def adopt_checkpoints(state: SessionState, found: Sequence[Checkpoint], policy: CompactionPolicy) -> SessionState:
    """``state`` with the prepared checkpoints it lacks, as the next turn adopts them (``state`` if none).

    Nearest end last, as ``compact_history`` keeps them; the oldest beyond ``max_checkpoints`` drop out.
    ``ventana replay whatif`` applies the same rule between turns, so a replay compacts where the gateway did.
    """
    have = {c.range_hash for c in state.checkpoints}
    new = [c for c in found if c.range_hash not in have]
    if not new:
        return state
    merged = sorted((*state.checkpoints, *new), key=lambda c: (c.end, c.range_hash))
    kept = tuple(merged[-policy.max_checkpoints :])
    return state if {c.range_hash for c in kept} == have else replace(state, checkpoints=kept)


def _growth(ctx: Context) -> int:
    """What the next turn is expected to add: the newest exchange (an assistant reply and the user's
    next message, or a loop's two newest rounds) of the client's request."""
    messages = ctx.messages
    starts = [i for i, m in enumerate(messages) if m.get("role") in ("user", "assistant") and not is_gateway_block(m)]
    if len(starts) < 2:
        return 0
    return ctx.env.counter.messages(messages[starts[-2] :])
