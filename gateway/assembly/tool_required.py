"""The tools a selection must keep whatever their score: named, allowed, called or pinned.

A tool the history called is part of the task's state (the model may call it again, and a
provider rejects a history naming a tool it is not offered on some APIs); a tool named by
``tool_choice`` is one the client demands. Both survive any pruning.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from gateway.assembly.context import Context, Message, Tool
from gateway.assembly.tool_scoring import tool_name
from gateway.history_fold import CHUNK, HistoryFold, union


def required_names(ctx: Context, pinned: Sequence[str], tools: Sequence[Tool], names: Sequence[str]) -> set[str]:
    """Names that must survive whatever their score."""
    required = set(pinned) | _chosen_names(ctx.params.get("tool_choice")) | called_names(ctx.messages)
    required |= {tool_name(t) for t in tools if not isinstance(t.get("function"), Mapping)}
    return required & set(names)


def _chosen_names(choice: Any) -> set[str]:
    if not isinstance(choice, Mapping):
        return set()
    kind = choice.get("type")
    if kind == "function" and isinstance(choice.get("function"), Mapping):
        return {str(choice["function"].get("name"))}
    if kind == "custom" and isinstance(choice.get("custom"), Mapping):
        return {str(choice["custom"].get("name"))}
    if kind == "allowed_tools" and isinstance(choice.get("allowed_tools"), Mapping):
        return {tool_name(t) for t in choice["allowed_tools"].get("tools") or () if isinstance(t, Mapping)}
    return set()


#: dict first: parsed JSON is always dicts, and an ABC isinstance check costs ~10x more.
_MAP = (dict, Mapping)


def called_names(messages: Sequence[Message]) -> frozenset[str]:
    """Every tool name the history called; remembered per chunk (``gateway.history_fold``)."""
    if len(messages) <= CHUNK:
        return _called_in(messages)
    return union(_CALLED.parts(messages))


def _called_in(messages: Sequence[Message]) -> frozenset[str]:
    called: set[str] = set()
    for m in messages:
        calls = m.get("tool_calls")
        if not calls:
            continue
        for call in calls:
            fn = call.get("function") if isinstance(call, _MAP) else None
            if isinstance(fn, _MAP) and fn.get("name"):
                called.add(str(fn["name"]))
    return frozenset(called)


_CALLED: HistoryFold[frozenset[str]] = HistoryFold(lambda chunk: _called_in(chunk.messages))
