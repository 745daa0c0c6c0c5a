"""How a selected tool set is sent: pruned list, OpenAI ``allowed_tools``, or Anthropic ``defer_loading``.

Tool definitions open the prompt, so the way a selection is expressed decides what the
provider's prefix cache sees:

- ``prune``: only the selected tools are sent, in the sticky order. Fewest prompt tokens;
  the prefix changes whenever the set does.
- ``allowed_tools`` (OpenAI): the client's full tool list is sent unchanged (its prefix
  stays cached and is billed at the cached rate) and ``tool_choice`` becomes
  ``{"type": "allowed_tools", "allowed_tools": {"mode": "auto"|"required", "tools": [...]}}``
  naming the selection, so the model may only call those.
- ``defer_loading`` (Anthropic, via litellm): the selected tools are sent first, in the
  sticky order; every other tool is sent after them with ``"defer_loading": true`` and a
  ``{"type": "tool_search_tool_bm25_20251119", "name": "tool_search_tool_bm25"}`` tool is
  appended. Anthropic keeps deferred tools out of the prompt and lets the model find
  them through the search tool, so a missed tool costs a search round trip, not a failure.

A mode the provider does not support falls back to ``prune`` (and the decision says so).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Literal

from gateway.assembly.context import Tool
from gateway.assembly.tool_scoring import tool_name

ToolMode = Literal["prune", "allowed_tools", "defer_loading"]

#: Providers (litellm prefixes) whose API accepts each cache-preserving mode.
MODE_PROVIDERS: Mapping[str, frozenset[str]] = {
    "allowed_tools": frozenset({"openai", "azure"}),
    "defer_loading": frozenset({"anthropic"}),
}
TOOL_SEARCH_TOOL: Mapping[str, str] = {"type": "tool_search_tool_bm25_20251119", "name": "tool_search_tool_bm25"}
_SEARCH_TYPES = ("tool_search_tool_bm25_20251119", "tool_search_tool_regex_20251119")
#: The search tool the gateway serves itself when it prunes (``gateway.edges.tool_search``): one
#: required string ``query``. Its name and parameter are a contract other components rely on.
FIND_TOOLS_NAME = "find_tools"
FIND_TOOLS: Mapping[str, Any] = {
    "type": "function",
    "function": {
        "name": FIND_TOOLS_NAME,
        "description": (
            "Only some of the available tools are listed. When none of the listed tools can do "
            "the next step, call this with a description of what the tool you need does; "
            "matching tools are then listed and you can call them."
        ),
        "parameters": {
            "type": "object",
            "properties": {"query": {"type": "string", "description": "What the tool you need does"}},
            "required": ["query"],
        },
    },
}


def effective_mode(mode: ToolMode, provider: str) -> ToolMode:
    """The mode actually used for ``provider``: ``mode`` when supported, else ``prune``."""
    if mode == "prune" or provider in MODE_PROVIDERS[mode]:
        return mode
    return "prune"


def pruned_tools(tools: Sequence[Tool], selected: Sequence[str]) -> tuple[Tool, ...]:
    """The client's tool objects for the selected names, in selection order (duplicates kept)."""
    by_name: dict[str, list[Tool]] = {}
    for tool in tools:
        by_name.setdefault(tool_name(tool), []).append(tool)
    return tuple(t for name in selected for t in by_name.get(name, ()))


def allowed_tools_choice(selected: Sequence[str], tools: Sequence[Tool], client_choice: Any) -> dict[str, Any]:
    """The ``tool_choice`` restricting calls to ``selected``; ``required`` stays required."""
    refs: list[dict[str, Any]] = []
    for tool in pruned_tools(tools, selected):
        if isinstance(tool.get("function"), Mapping):
            refs.append({"type": "function", "function": {"name": tool_name(tool)}})
        else:
            refs.append({"type": str(tool.get("type")), "name": tool_name(tool)})
    mode = "required" if client_choice == "required" else "auto"
    return {"type": "allowed_tools", "allowed_tools": {"mode": mode, "tools": refs}}


def deferred_tools(tools: Sequence[Tool], selected: Sequence[str]) -> tuple[Tool, ...]:
    """Selected tools first (sticky order), the rest marked ``defer_loading``, then the search tool."""
    chosen = set(selected)
    loaded = pruned_tools(tools, selected)
    deferred = tuple({**t, "defer_loading": True} for t in tools if tool_name(t) not in chosen)
    has_search = any(t.get("type") in _SEARCH_TYPES for t in tools)
    search = () if has_search or not deferred else (dict(TOOL_SEARCH_TOOL),)
    return (*loaded, *deferred, *search)


def is_restricting_choice(choice: Any) -> bool:
    """Whether the client's ``tool_choice`` already restricts the tools (named, none, allowed_tools)."""
    if choice == "none":
        return True
    return isinstance(choice, Mapping) and choice.get("type") in ("function", "custom", "allowed_tools")
