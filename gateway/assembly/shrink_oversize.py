"""Shrink the one message that keeps a request over the window, instead of letting the provider refuse it.

Runs after compaction: when the prompt is still above ``direct_fraction`` of the context
window (80 %, the capsule's margin), the culprit is a single huge message (a pasted
report, a long tool result) that compaction does not touch. The largest user or tool
message is shrunk to what the rest of the prompt leaves under that line, with the
capsule's strategy for its size and the question:

- ``chunk_and_extract`` for a lookup question: the most relevant sliding windows, verbatim;
- ``summarization_chain`` up to ``chain_max_factor`` times too large;
- ``hierarchical_summarization`` up to ``max_shrink_factor`` times too large;

summaries come from ``env.summarizer`` within ``max_summarizer_calls``, else extractively.
When nothing can fit and the provider would refuse the request anyway, it raises
``ContextTooLong`` (400) naming the tokens sent and the limit.

Representation: the shrunk message keeps its role (and ``tool_call_id``) and its content
becomes a ``<condensed`` gateway block that keeps the message's first and last
``edge_tokens`` verbatim (where a pasted document's question usually is). Its decision
carries ``detail["shrunk_digest"]`` (the digest of the client's message: its index moves once a
summary replaced older rounds, which made the safety check reject every such turn, issue 34) and
``detail["shrunk_message"]`` (its index in the list this pass saw); ``verify_assembly`` accepts a
gateway block in the place of exactly that message and of no other. A shrunk tool result says how the
model gets the rest back: call the tool again, narrower (``RECOVER``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

from pydantic import Field

from gateway.assembly.condense_text import (
    Condensed,
    extract_relevant,
    plan_calls,
    summarize_chain,
    summarize_extractive,
    summarize_hierarchy,
)
from gateway.assembly.context import Context, Decision, Message
from gateway.assembly.policy import PassPolicy
from gateway.assembly.text_relevance import edges, is_lookup
from gateway.assembly.verify_assembly import is_gateway_block, last_client_user, shrunk_digest
from gateway.errors import ContextTooLong
from gateway.tokens import content_text

PASS = "shrink_oversize"
NOTE = "The gateway shortened this message to fit the model's context window; markers show what was left out."
#: Added to a shortened tool result: the gateway serves no full copy, the tool itself can.
RECOVER = (
    "The full output of {tool} (call {call}) was {size} tokens; to read a part that was left out, "
    "call {tool} again for just that part (a line range, a narrower search)."
)


class OversizePolicy(PassPolicy):
    """When and how an oversize message is shrunk (the capsule's thresholds)."""

    direct_fraction: float = Field(default=0.8, gt=0, le=1)
    max_summarizer_calls: int = Field(default=16, ge=0)
    chain_max_factor: float = Field(default=3.0, ge=1)
    max_shrink_factor: float = Field(default=200.0, ge=1)
    min_message_tokens: int = Field(default=512, ge=64)
    edge_tokens: int = Field(default=256, ge=0)
    window_tokens: int = Field(default=512, ge=32)
    window_overlap: int = Field(default=64, ge=0)
    summary_chunk_tokens: int = Field(default=8000, ge=256)


def shrink_oversize(ctx: Context, policy: OversizePolicy) -> tuple[Context, list[Decision]]:
    """Replace the largest user/tool message by a ``<condensed`` block when the prompt exceeds ``direct_fraction``.

    Returns ``ctx`` when the prompt already fits or when shrinking cannot help a request the
    provider would still accept. Raises ContextTooLong when it cannot help and the prompt
    exceeds the whole window.
    """
    counter, window = ctx.env.counter, ctx.env.context_window
    limit = int(window * policy.direct_fraction)
    if ctx.prompt_tokens_within(limit):
        return ctx, []
    total = ctx.prompt_tokens()
    index = _largest(ctx.messages, counter.message)
    if index < 0:
        return _refuse(ctx, total, "it has no user or tool message that could be shortened")
    message = ctx.messages[index]
    size = counter.message(message)
    target = limit - (total - size)
    if target < policy.min_message_tokens or size / target > policy.max_shrink_factor:
        why = f"the largest message ({size} tokens) would have to shrink to {target} tokens"
        return _refuse(ctx, total, why)
    shrunk = _shrink(ctx, index, target, policy)
    if isinstance(shrunk, str):
        return _refuse(ctx, total, shrunk)
    new, strategy, condensed = shrunk
    after = counter.message(new)
    reason = _reason(strategy, size, after, condensed)
    decision = Decision(PASS, "shrunk", size, after, reason, _detail(ctx, index, strategy, condensed, limit))
    return ctx.replace(messages=(*ctx.messages[:index], new, *ctx.messages[index + 1 :])), [decision]


def _shrink(ctx: Context, index: int, target: int, policy: OversizePolicy) -> tuple[Message, str, Condensed] | str:
    """The shrunk message within ``target`` tokens, its strategy and cost; or why it cannot be done.

    Counts are estimated per sentence; if the rendered message still overshoots (token
    merges at the joins), the body budget is cut by the overshoot and the text condensed again.
    """
    counter, message = ctx.env.counter, ctx.messages[index]
    size = counter.message(message)
    text = content_text(message.get("content"))[0]
    edge = min(policy.edge_tokens, target // 4)  # the edges never take more than half of a small target
    frame = counter.message(
        {**message, "content": _frame("hierarchical_summarization", 99, size, "", _recover(ctx, index, size))}
    )
    budget = target - frame - 2 * edge
    head, middle, tail = edges(text, edge, counter.text)
    query = head + "\n" + tail if index == last_client_user(ctx.messages) else _last_user_text(ctx.messages)
    strategy = _strategy(query, size / target, policy)
    over_cap = _over_call_cap(strategy, counter.text(middle), budget, ctx, policy)
    if over_cap:
        return over_cap
    condensed = _condense(strategy, middle, query, budget, ctx, policy)
    recover = _recover(ctx, index, size)
    for _ in range(3):
        body = head + condensed.text + tail
        new = {**message, "content": _frame(strategy, condensed.calls, size, body, recover)}
        overshoot = counter.message(new) - target
        if overshoot <= 0:
            return new, strategy, condensed
        budget -= overshoot + 16
        condensed = _tighten(condensed, strategy, middle, query, budget, ctx, policy)
    return f"the condensed message still needs {overshoot} tokens more than the {target} available"


def _tighten(
    condensed: Condensed, strategy: str, middle: str, query: str, budget: int, ctx: Context, policy: OversizePolicy
) -> Condensed:
    """Condense again within a smaller budget without spending more summariser calls."""
    if strategy == "chunk_and_extract":
        return _condense(strategy, middle, query, budget, ctx, policy)
    return replace(condensed, text=summarize_extractive(condensed.text, budget, ctx.env.counter.text))


def _largest(messages: Sequence[Message], count: Callable[[Message], int]) -> int:
    """Index of the largest user or tool message with text content the gateway did not write (-1: none)."""
    best, best_size = -1, -1
    for i, m in enumerate(messages):
        if m.get("role") in ("user", "tool") and isinstance(m.get("content"), str) and not is_gateway_block(m):
            size = count(m)
            if size > best_size:
                best, best_size = i, size
    return best


def _last_user_text(messages: Sequence[Message]) -> str:
    i = last_client_user(messages)
    return content_text(messages[i].get("content"))[0] if i >= 0 else ""


def _strategy(query: str, factor: float, policy: OversizePolicy) -> str:
    if is_lookup(query):
        return "chunk_and_extract"
    if factor <= policy.chain_max_factor:
        return "summarization_chain"
    return "hierarchical_summarization"


def _condense(strategy: str, middle: str, query: str, budget: int, ctx: Context, policy: OversizePolicy) -> Condensed:
    count, summarizer = ctx.env.counter.text, ctx.env.summarizer
    if strategy == "chunk_and_extract":
        return extract_relevant(middle, query, budget, policy.window_tokens, policy.window_overlap, count)
    chunk = _summary_chunk(count(middle), ctx, policy)
    if strategy == "summarization_chain":
        return summarize_chain(middle, budget, chunk, policy.max_summarizer_calls, summarizer, count)
    return summarize_hierarchy(middle, budget, chunk, policy.max_summarizer_calls, summarizer, count)


def _summary_chunk(tokens: int, ctx: Context, policy: OversizePolicy) -> int:
    """Chunk size for summarising: grown (as the capsule's budgeted chain does) so the calls stay under the cap."""
    if ctx.env.summarizer is None:
        return policy.summary_chunk_tokens
    return max(policy.summary_chunk_tokens, -(-tokens // max(1, policy.max_summarizer_calls)))


def _over_call_cap(strategy: str, tokens: int, budget: int, ctx: Context, policy: OversizePolicy) -> str | None:
    """Why summarising would break the call cap (or overflow the summariser's own window), or None."""
    if strategy == "chunk_and_extract" or ctx.env.summarizer is None:
        return None
    chunk = _summary_chunk(tokens, ctx, policy)
    calls = plan_calls(tokens, budget, chunk)[1]
    if calls <= policy.max_summarizer_calls and chunk <= ctx.env.context_window // 2:
        return None
    needed = plan_calls(tokens, budget, policy.summary_chunk_tokens)[1]
    return f"summarising it needs about {needed} summariser calls, the cap is {policy.max_summarizer_calls}"


def _frame(strategy: str, calls: int, size: int, body: str, recover: str = "") -> str:
    note = f"{NOTE} {recover}" if recover else NOTE
    return (
        f'<condensed strategy="{strategy}" original_tokens="{size}" summarizer_calls="{calls}" note="{note}">\n'
        f"{body}\n</condensed>"
    )


def _recover(ctx: Context, index: int, size: int) -> str:
    """For a tool result: how the model reads what was left out (the call it answers, made again)."""
    message = ctx.messages[index]
    if message.get("role") != "tool":
        return ""
    call_id = str(message.get("tool_call_id"))
    tool = "the tool"
    for m in reversed(ctx.messages[:index]):
        for call in m.get("tool_calls") or ():
            if isinstance(call, dict) and str(call.get("id")) == call_id:
                tool = str((call.get("function") or {}).get("name") or tool)
        if m.get("role") == "assistant":
            break
    return RECOVER.format(tool=tool, call=call_id, size=size)


def _reason(strategy: str, size: int, after: int, c: Condensed) -> str:
    return f"message of {size} tokens shrunk to {after} by {strategy} ({c.calls} summariser calls)"


def _detail(ctx: Context, index: int, strategy: str, c: Condensed, limit: int) -> dict[str, Any]:
    summarizer = (
        "none" if strategy == "chunk_and_extract" else (ctx.env.summarizer.name if ctx.env.summarizer else "extractive")
    )
    return {
        "strategy": strategy,
        "shrunk_message": index,
        "shrunk_digest": shrunk_digest(ctx.messages[index]),
        "message_index": index,
        "role": ctx.messages[index].get("role"),
        "summarizer": summarizer,
        "summarizer_calls": c.calls,
        "summarizer_failures": c.failures,
        "pieces": c.pieces,
        "kept_pieces": c.kept_pieces,
        "limit": limit,
        "context_window": ctx.env.context_window,
    }


def _refuse(ctx: Context, total: int, why: str) -> tuple[Context, list[Decision]]:
    """Raise the 400 when the provider would refuse the request anyway; else leave it as sent."""
    window = ctx.env.context_window
    if total <= window:
        return ctx, []
    raise ContextTooLong(
        f"the request has {total} prompt tokens and model {ctx.env.model!r} accepts at most {window}; "
        f"the gateway could not shrink it to fit: {why}",
        param="messages",
    )
