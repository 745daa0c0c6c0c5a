"""Clear old tool results to one-line stubs before any summarising (cheaper first).

When the request (tools + messages + generation reserve) is over
``policy.compaction.threshold`` of the context window, even after reusing a stored
summary, the oldest tool results of the middle of the history become
``[result of search_flights cleared: 4,210 tokens]``. The ``tool`` message stays, with
its ``tool_call_id``, so every call keeps its result. Clearing goes down to the lower
watermark (``prepare_at``), so it happens in batches rather than a little every turn,
and not at all when even clearing everything would leave the request over the threshold
while summarising is enabled (the summary replaces those results anyway),
and what was cleared stays cleared on later turns (sticky, by ``tool_call_id``) so the
prefix does not change back and forth. The originals are kept in the Context's
annotations: a later summary is written from them, so cleared facts are not lost.

Never touches the head (system/developer messages, first user message) or the recent turns.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace

from gateway.assembly.compaction_layout import (
    ORIGINALS_KEY,
    Layout,
    best_application,
    compaction_memory,
    layout,
    original_messages,
    request_tokens,
    token_limit,
    with_memory,
)
from gateway.assembly.compaction_policy import CompactionPolicy
from gateway.assembly.context import Context, Decision, Message, SessionState
from gateway.summarize.transcript import call_names
from gateway.tokens import content_text

PASS = "clear_tool_results"


def stub(tool: str, tokens: int) -> str:
    return f"[result of {tool} cleared: {tokens:,} tokens]"


def _candidates(ctx: Context, lay: Layout, start: int, policy: CompactionPolicy) -> list[int]:
    """Indices of clearable tool results in the middle, oldest first."""
    out = []
    for i in range(start, lay.tail_start):
        m = ctx.messages[i]
        if m.get("role") != "tool" or content_text(m.get("content"))[0].startswith("[result of "):
            continue
        if ctx.env.counter.text(content_text(m.get("content"))[0]) >= max(policy.clear_min_tokens, 1):
            out.append(i)
    return out


def _choose(
    ctx: Context, lay: Layout, policy: CompactionPolicy, sticky: set[str], names: Mapping[str, str]
) -> list[int]:
    """Sticky results first; then more, oldest first, while over the threshold, down to ``prepare_at``."""
    cp, applied = best_application(ctx, original_messages(ctx), lay, policy)
    if not sticky and request_tokens(ctx, applied, policy) <= token_limit(ctx, policy.threshold):
        return []  # the common case, decided before looking at every tool result
    start = cp.end if cp is not None else lay.head_end  # results before it are summarised away
    candidates = _candidates(ctx, lay, start, policy)
    chosen = [i for i in candidates if str(ctx.messages[i].get("tool_call_id")) in sticky]
    tokens = request_tokens(ctx, applied, policy) - sum(_saving(ctx, i, names) for i in chosen)
    if tokens <= token_limit(ctx, policy.threshold):
        return chosen
    target = token_limit(ctx, policy.prepare_at)
    for i in candidates:
        if tokens <= target:
            break
        if i not in chosen:
            chosen.append(i)
            tokens -= _saving(ctx, i, names)
    if tokens > token_limit(ctx, policy.threshold) and "summarize" in policy.strategies:
        return []  # clearing cannot get under the threshold: the summary replaces these results anyway
    return sorted(chosen)


def _saving(ctx: Context, i: int, names: Mapping[str, str]) -> int:
    """Exact tokens saved by clearing message ``i`` (the stub as it will be written)."""
    m = ctx.messages[i]
    return ctx.env.counter.message(m) - ctx.env.counter.message(_cleared(ctx, m, names))


def _cleared(ctx: Context, m: Message, names: Mapping[str, str]) -> Message:
    """The stub of tool result ``m``; ``names`` maps call ids to tool names (built once per pass: O(n))."""
    tool = names.get(str(m.get("tool_call_id")), "tool")
    return {**m, "content": stub(tool, ctx.env.counter.text(content_text(m.get("content"))[0]))}


def clear_tool_results(ctx: Context, state: SessionState, policy: CompactionPolicy) -> tuple[Context, list[Decision]]:
    """Replace old tool results by stubs while the request is over the threshold; keep every pair."""
    if "clear_tool_results" not in policy.strategies:
        return ctx, []
    lay = layout(ctx.messages, policy, ctx.env.counter)
    if lay is None or not lay.has_middle:
        return ctx, []
    sticky = {str(x) for x in compaction_memory(state).get("cleared", ())}
    names = call_names(ctx.messages)
    chosen = _choose(ctx, lay, policy, sticky, names)
    if not chosen:
        return ctx, []
    messages: list[Message] = list(ctx.messages)
    decisions: list[Decision] = []
    for i in chosen:
        m = ctx.messages[i]
        messages[i] = _cleared(ctx, m, names)
        tool = str(messages[i]["content"])[len("[result of ") :].split(" cleared:")[0]
        decisions.append(
            Decision(
                PASS,
                "cleared",
                tokens_before=ctx.env.counter.message(m),
                tokens_after=ctx.env.counter.message(messages[i]),
                reason=f"request over {policy.threshold:.0%} of the context window; old tool result cleared",
                detail={"tool": tool, "message_index": i, "threshold": policy.threshold},
            )
        )
    present = {str(m.get("tool_call_id")) for m in ctx.messages if m.get("role") == "tool"}
    cleared = sorted((sticky & present) | {str(ctx.messages[i].get("tool_call_id")) for i in chosen})
    originals = {**(ctx.annotations.get(ORIGINALS_KEY) or {}), **{i: ctx.messages[i] for i in chosen}}
    session = replace(ctx.session, extra=with_memory(ctx.session, cleared=cleared))
    out = ctx.replace(messages=tuple(messages), session=session).annotate(**{ORIGINALS_KEY: originals})
    return out, decisions
