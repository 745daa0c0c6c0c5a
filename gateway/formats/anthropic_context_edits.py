"""Anthropic's context editing (``context_management.edits``), applied by the gateway for upstreams without it.

Claude Code and the Anthropic SDKs ask Anthropic to clear old tool results (``clear_tool_uses_20250919``)
and old thinking (``clear_thinking_20251015``) and read back what was done in the response's
``context_management.applied_edits``. Toward Anthropic the request goes through natively; toward any other
model the gateway applies the same edits to the Messages body itself, with Anthropic's documented
parameters and defaults, and reports them the same way, so the client cannot tell the difference.

- ``clear_tool_uses_20250919``: when ``trigger`` is met (``input_tokens`` over ``value``, default 100,000;
  or more than ``value`` ``tool_uses``), the results of all but the newest ``keep`` tool uses (default 3)
  are replaced by a short stub, except tools named in ``exclude_tools``; ``clear_tool_inputs`` (true, or a
  list of tool names) also empties their inputs; with ``clear_at_least``, nothing is cleared unless at
  least that many input tokens would go.
- ``clear_thinking_20251015``: thinking blocks are removed from all but the newest ``keep`` assistant
  turns that have them (``{"type": "thinking_turns", "value": N}``, default 1; ``"all"`` keeps all).

Pure: a Messages body in, the edited body (without ``context_management``) and the applied edits out.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from gateway.errors import RequestError

CLEAR_TOOL_USES = "clear_tool_uses_20250919"
CLEAR_THINKING = "clear_thinking_20251015"
DEFAULT_TRIGGER_TOKENS = 100_000
DEFAULT_KEEP_TOOL_USES = 3
DEFAULT_KEEP_THINKING_TURNS = 1
CLEARED_RESULT = "[tool result cleared to save context; call the tool again if it is needed]"
_THINKING = ("thinking", "redacted_thinking")

Count = Callable[[Any], int]


def _fail(message: str, param: str) -> RequestError:
    return RequestError(message, param=param, code="invalid_value")


def _value(spec: Any, kinds: tuple[str, ...], default: int | None, param: str) -> tuple[str | None, int | None]:
    if spec is None:
        return (kinds[0] if default is not None else None), default
    if spec == "all" and "all" in kinds:
        return "all", None
    if not isinstance(spec, Mapping) or spec.get("type") not in kinds:
        raise _fail(f"{param} must be an object whose type is one of {list(kinds)}", param)
    if spec["type"] == "all":
        return "all", None
    value = spec.get("value")
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise _fail(f"{param}.value must be a non-negative integer", f"{param}.value")
    return str(spec["type"]), value


def _blocks(message: Mapping[str, Any]) -> list[Any]:
    content = message.get("content")
    return list(content) if isinstance(content, list) else []


def _clear_thinking(
    messages: list[dict[str, Any]], edit: Mapping[str, Any], count: Count, param: str
) -> dict[str, Any] | None:
    kind, keep = _value(edit.get("keep"), ("thinking_turns", "all"), DEFAULT_KEEP_THINKING_TURNS, f"{param}.keep")
    if kind == "all":
        return None
    turns = [
        i
        for i, m in enumerate(messages)
        if m.get("role") == "assistant"
        and any(isinstance(b, Mapping) and b.get("type") in _THINKING for b in _blocks(m))
    ]
    older = turns[: max(0, len(turns) - (keep or 0))]
    if not older:
        return None
    cleared = 0
    for i in older:
        kept = [b for b in _blocks(messages[i]) if not (isinstance(b, Mapping) and b.get("type") in _THINKING)]
        cleared += sum(count(b) for b in _blocks(messages[i]) if isinstance(b, Mapping) and b.get("type") in _THINKING)
        messages[i] = {**messages[i], "content": kept or [{"type": "text", "text": ""}]}
    return {"type": CLEAR_THINKING, "cleared_thinking_turns": len(older), "cleared_input_tokens": cleared}


def _clear_tool_uses(
    messages: list[dict[str, Any]], edit: Mapping[str, Any], count: Count, total: int, param: str
) -> dict[str, Any] | None:
    trigger_kind, trigger = _value(
        edit.get("trigger"), ("input_tokens", "tool_uses"), DEFAULT_TRIGGER_TOKENS, f"{param}.trigger"
    )
    _, keep = _value(edit.get("keep"), ("tool_uses",), DEFAULT_KEEP_TOOL_USES, f"{param}.keep")
    _, at_least = _value(edit.get("clear_at_least"), ("input_tokens",), None, f"{param}.clear_at_least")
    excluded = edit.get("exclude_tools") or ()
    inputs = edit.get("clear_tool_inputs") or False
    if not isinstance(excluded, list | tuple) or not all(isinstance(n, str) for n in excluded):
        raise _fail(f"{param}.exclude_tools must be an array of tool names", f"{param}.exclude_tools")
    uses = [
        (i, j, b)
        for i, m in enumerate(messages)
        if m.get("role") == "assistant"
        for j, b in enumerate(_blocks(m))
        if isinstance(b, Mapping) and b.get("type") == "tool_use"
    ]
    if (trigger_kind == "tool_uses" and len(uses) <= (trigger or 0)) or (
        trigger_kind == "input_tokens" and total <= (trigger or 0)
    ):
        return None
    candidates = [u for u in uses[: max(0, len(uses) - (keep or 0))] if u[2].get("name") not in excluded]
    ids = {str(b.get("id")): b for _, _, b in candidates}
    edited: list[tuple[int, int, dict[str, Any]]] = []
    cleared = 0
    for i, m in enumerate(messages):
        if m.get("role") != "user":
            continue
        for j, b in enumerate(_blocks(m)):
            if isinstance(b, Mapping) and b.get("type") == "tool_result" and str(b.get("tool_use_id")) in ids:
                stub = {**b, "content": [{"type": "text", "text": CLEARED_RESULT}]}
                cleared += max(0, count(b.get("content")) - count(stub["content"]))
                edited.append((i, j, stub))
    for i, j, b in candidates:
        wants = inputs is True or (isinstance(inputs, list) and b.get("name") in inputs)
        if wants and b.get("input"):
            cleared += count(b.get("input"))
            edited.append((i, j, {**b, "input": {}}))
    if not edited or (at_least is not None and cleared < at_least):
        return None
    for i, j, block in edited:
        content = _blocks(messages[i])
        content[j] = block
        messages[i] = {**messages[i], "content": content}
    return {"type": CLEAR_TOOL_USES, "cleared_tool_uses": len(candidates), "cleared_input_tokens": cleared}


def apply_context_edits(body: Mapping[str, Any], count: Count) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """Apply ``body["context_management"]["edits"]`` in order; the edited body and ``applied_edits``.

    ``count`` gives the tokens of a block, a content list or a whole body. A body without
    ``context_management`` comes back unchanged with no edits."""
    config = body.get("context_management")
    if config is None:
        return dict(body), []
    edits = config.get("edits") if isinstance(config, Mapping) else None
    if not isinstance(edits, list):
        raise _fail("context_management.edits must be an array", "context_management.edits")
    out = {k: v for k, v in body.items() if k != "context_management"}
    messages = [dict(m) for m in body.get("messages") or ()]
    applied: list[dict[str, Any]] = []
    for n, edit in enumerate(edits):
        param = f"context_management.edits[{n}]"
        kind = edit.get("type") if isinstance(edit, Mapping) else None
        if kind == CLEAR_THINKING:
            done = _clear_thinking(messages, edit, count, param)
        elif kind == CLEAR_TOOL_USES:
            done = _clear_tool_uses(messages, edit, count, count({**out, "messages": messages}), param)
        else:
            raise _fail(
                f"{param}.type {kind!r} is not an edit Ventana applies; it applies "
                f"{CLEAR_TOOL_USES} and {CLEAR_THINKING}",
                f"{param}.type",
            )
        if done is not None:
            applied.append(done)
    out["messages"] = messages
    return out, applied
