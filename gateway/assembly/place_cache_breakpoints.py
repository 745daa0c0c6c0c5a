"""Mark cache breakpoints for providers that cache only where the request says so.

OpenAI caches every prompt prefix automatically; Anthropic (and Bedrock/Vertex serving
Claude) cache only up to a content block carrying ``cache_control: {"type":
"ephemeral"}``, at most 4 per request. For those providers the gateway places them, in
this order of value, while there is room:

1. the end of the static prefix: the last leading system/developer message (or, without
   one, the last tool definition);
2. the end of the compacted summary (the last ``<summary`` block);
3. the latest stable message: the last message the client sent (it is in the next
   turn's prefix too). Never the trailing ``<reminder>``, which changes every turn; and when
   a ``<recalled>`` block stands just before that message (recall places it before the
   question), the client's message before the block: the next turn resends the question
   without the block, so only the prefix ending before it is read again.

Breakpoints the client already set and that are valid (``type`` "ephemeral") are kept
and count against the limit; invalid ones are left for the provider to judge. So does a Messages
body's top-level ``cache_control`` (automatic caching: the provider places that one itself), which
may take one of the four slots: placing up to four beside it could make a request the provider refuses.
Providers not listed in ``providers`` are left untouched.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from gateway.assembly.context import Context, Decision, Message, Tool
from gateway.assembly.message_text import is_system
from gateway.assembly.policy import PassPolicy
from gateway.assembly.render_reminder import parse_reminder
from gateway.assembly.verify_assembly import is_gateway_block

EPHEMERAL: Mapping[str, str] = {"type": "ephemeral"}
MAX_BREAKPOINTS = 4


class CachePolicy(PassPolicy):
    providers: tuple[str, ...] = ("anthropic", "bedrock", "vertex_ai")
    max_breakpoints: int = MAX_BREAKPOINTS


def _valid(marker: object) -> bool:
    return isinstance(marker, Mapping) and marker.get("type") == "ephemeral"


def count_breakpoints(messages: tuple[Message, ...], tools: tuple[Tool, ...] | None) -> int:
    """Valid breakpoints already in the request (content parts, messages and tools)."""
    n = sum(1 for t in tools or () if _valid(t.get("cache_control")))
    for m in messages:
        n += 1 if _valid(m.get("cache_control")) else 0
        content = m.get("content")
        if isinstance(content, list):
            n += sum(1 for p in content if isinstance(p, Mapping) and _valid(p.get("cache_control")))
    return n


def has_breakpoint(message: Message) -> bool:
    content = message.get("content")
    parts = content if isinstance(content, list) else []
    return _valid(message.get("cache_control")) or any(
        isinstance(p, Mapping) and _valid(p.get("cache_control")) for p in parts
    )


def mark(message: Message) -> Message | None:
    """The message with a breakpoint on its last text block; None when it has no text to mark."""
    content = message.get("content")
    if isinstance(content, str) and content:
        return {**message, "content": [{"type": "text", "text": content, "cache_control": dict(EPHEMERAL)}]}
    if isinstance(content, list):
        for i in range(len(content) - 1, -1, -1):
            part = content[i]
            if isinstance(part, Mapping) and part.get("type") == "text":
                new_part = {**part, "cache_control": dict(EPHEMERAL)}
                return {**message, "content": [*content[:i], new_part, *content[i + 1 :]]}
    return None


def _candidates(messages: tuple[Message, ...]) -> list[tuple[str, int]]:
    """(where, index) in order of value; index -1 stands for the last tool definition."""
    found: list[tuple[str, int]] = []
    leading = 0
    while leading < len(messages) and is_system(messages[leading]):
        leading += 1
    found.append(("static_prefix", leading - 1))
    summaries = [i for i, m in enumerate(messages) if str(m.get("content") or "").startswith("<summary")]
    if summaries:
        found.append(("summary", summaries[-1]))
    skip_to = len(messages)
    for i in range(len(messages) - 1, -1, -1):
        m = messages[i]
        if i >= skip_to or parse_reminder(m.get("content")) is not None or is_gateway_block(m):
            continue
        if i > 0 and str(messages[i - 1].get("content") or "").startswith("<recalled"):
            skip_to = i - 1  # the question after a recalled block: its prefix is not resent
            continue
        found.append(("latest_stable", i))
        break
    return found


def _markable_before(messages: list[Message], index: int) -> int:
    """The latest message at or before ``index`` with text to mark (a tool-call-only turn has none)."""
    while index >= 0 and not has_breakpoint(messages[index]) and mark(messages[index]) is None:
        index -= 1
    return index


def place_cache_breakpoints(ctx: Context, policy: CachePolicy) -> tuple[Context, list[Decision]]:
    """Add ``cache_control`` breakpoints where a provider needs them, never more than it allows."""
    if ctx.env.provider not in policy.providers:
        return ctx, []
    automatic = 1 if _valid(ctx.params.get("cache_control")) else 0  # a Messages body's top-level marker
    room = policy.max_breakpoints - count_breakpoints(ctx.messages, ctx.tools) - automatic
    messages: list[Message] = list(ctx.messages)
    tools: tuple[Tool, ...] | None = ctx.tools
    positions: list[dict[str, Any]] = []
    for where, index in _candidates(ctx.messages):
        if room <= 0:
            break
        if index < 0:
            if tools and not _valid(tools[-1].get("cache_control")):
                tools = (*tools[:-1], {**tools[-1], "cache_control": dict(EPHEMERAL)})
                positions.append({"where": "tools", "tool": len(tools) - 1})
                room -= 1
            continue
        if where == "latest_stable":
            index = _markable_before(messages, index)
        if index < 0 or has_breakpoint(messages[index]) or any(p.get("index") == index for p in positions):
            continue
        marked = mark(messages[index])
        if marked is not None:
            messages[index] = marked
            positions.append({"where": where, "index": index})
            room -= 1
    if not positions:
        return ctx, []
    decision = Decision(
        "place_cache_breakpoints",
        "placed",
        reason=f"placed {len(positions)} cache breakpoint(s) for {ctx.env.provider}",
        detail={"positions": positions, "changes_system": any(p["where"] == "static_prefix" for p in positions)},
    )
    return ctx.replace(messages=tuple(messages), tools=tools), [decision]
