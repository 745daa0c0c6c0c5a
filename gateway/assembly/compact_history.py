"""Replace the middle of a long history by one summary, reusing stored summaries byte for byte.

Trigger: the request (tools + messages + generation reserve) is over
``policy.compaction.threshold`` of the model's context window. The head (system and
developer messages, the first user message) and the recent turns are never touched; the
middle becomes ONE ``<summary ...>`` message at the place it occupied. The middle ends
where a user message starts, so a ``tool_calls`` message always leaves with its results.

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

from dataclasses import replace

from gateway.assembly.compaction_layout import (
    apply_checkpoint,
    best_application,
    compaction_memory,
    layout,
    original_messages,
    request_tokens,
    token_limit,
    with_memory,
)
from gateway.assembly.compaction_policy import CompactionPolicy
from gateway.assembly.context import Checkpoint, Context, Decision, SessionState
from gateway.assembly.summarize_range import RangeSummary, summarize_range

PASS = "compact_history"
MAX_DROPPED_LISTED = 50  # the decision lists this many dropped facts; ``dropped_count`` has them all


def _detail(cp: Checkpoint, policy: CompactionPolicy, calls: int, reused: bool) -> dict[str, object]:
    return {
        "threshold": policy.threshold,
        "start": cp.start,
        "end": cp.end,
        "summarizer": cp.summarizer,
        "summarizer_calls": calls,
        "reused": reused,
    }


def _reuse(ctx: Context, cp: Checkpoint, policy: CompactionPolicy, before: int) -> tuple[Context, list[Decision]]:
    """Send a stored summary again; the first turn it takes effect is that compaction's turn.

    A checkpoint the previous turn did not send (one prepared ahead in the background, or by
    another replica) changes what the model sees now: it is recorded as ``compacted`` (with
    ``prepared_ahead``) so metrics, the sessions list and the dashboards count it once; the
    turns after it, which send the same bytes, record ``checkpoint_reused``.
    """
    applied = apply_checkpoint(ctx.messages, cp)
    taking_effect = compaction_memory(ctx.session).get("active") != cp.range_hash
    detail = _detail(cp, policy, 0, True)
    if taking_effect:
        detail["prepared_ahead"] = True
    decision = Decision(
        PASS,
        "compacted" if taking_effect else "checkpoint_reused",
        tokens_before=before,
        tokens_after=request_tokens(ctx, applied, policy),
        reason=(
            f"request over {policy.threshold:.0%} of the context window; middle replaced by the summary prepared ahead"
            if taking_effect
            else "history starts with a summarised range; its stored summary is sent again byte for byte"
        ),
        detail=detail,
    )
    session = replace(ctx.session, extra=with_memory(ctx.session, active=cp.range_hash))
    return ctx.replace(messages=applied, session=session), [decision]


def _store(state: SessionState, cp: Checkpoint, policy: CompactionPolicy) -> SessionState:
    if not policy.reuse_checkpoints:
        return state
    kept = tuple(c for c in state.checkpoints if c.range_hash != cp.range_hash)
    checkpoints = (*kept, cp)[-policy.max_checkpoints :]
    return replace(state, checkpoints=checkpoints, extra=with_memory(state, active=cp.range_hash))


def _compacted(
    ctx: Context, result: RangeSummary, policy: CompactionPolicy, before: int
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
        "dropped": list(result.dropped[:MAX_DROPPED_LISTED]),
        "dropped_count": len(result.dropped),
    }
    if after > token_limit(ctx, policy.threshold):
        detail["still_over"] = True
    decisions.append(
        Decision(
            PASS,
            "compacted",
            tokens_before=before,
            tokens_after=after,
            reason=f"request over {policy.threshold:.0%} of the context window; middle replaced by a summary",
            detail=detail,
        )
    )
    return ctx.replace(messages=applied, session=_store(ctx.session, cp, policy)), decisions


def compact_history(ctx: Context, state: SessionState, policy: CompactionPolicy) -> tuple[Context, list[Decision]]:
    """Replace the middle of the history by one summary once the request passes the threshold."""
    if "summarize" not in policy.strategies:
        return ctx, []
    originals = original_messages(ctx)
    lay = layout(originals, policy, ctx.env.counter)
    if lay is None or not lay.has_middle:
        return ctx, []
    limit = token_limit(ctx, policy.threshold)
    before = request_tokens(ctx, ctx.messages, policy)
    cp, applied = best_application(ctx, originals, lay, policy)
    if cp is not None and (request_tokens(ctx, applied, policy) <= limit or cp.end >= lay.tail_start):
        return _reuse(ctx, cp, policy, before)
    if cp is None and before <= limit:
        return ctx, []
    result = summarize_range(originals, lay.head_end, lay.tail_start, cp, ctx.env.summarizer, policy, ctx.env.counter)
    return _compacted(ctx, result, policy, before)
