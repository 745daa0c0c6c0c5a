"""Name the component each part of an assembled request belongs to, and its zone.

Components: system, tools, memory, summary, history, documents, recalled, query,
reminder. Zones group them as the validation gate sees a context: the static prefix
(system, memory, tools), the compacted summary, the recent history, and the dynamic
tail (documents, recalled passages, the current query and the reminder). The
replay report, the CLI and the UI all draw from this one classification.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from gateway.tokens import TokenCounter

COMPONENTS = ("system", "tools", "memory", "summary", "history", "documents", "recalled", "query", "reminder")
ZONES: dict[str, str] = {
    "system": "static prefix",
    "tools": "static prefix",
    "memory": "static prefix",
    "summary": "compacted summary",
    "history": "recent history",
    "documents": "dynamic tail",
    "recalled": "dynamic tail",
    "query": "dynamic tail",
    "reminder": "dynamic tail",
}
_MARKERS = (
    ("<reminder>", "reminder"),
    ("<summary", "summary"),
    ("<documents", "documents"),
    ("<recalled", "recalled"),
    ("<memory", "memory"),
)


def _marker(message: Mapping[str, Any]) -> str | None:
    content = message.get("content")
    if isinstance(content, str):
        for prefix, name in _MARKERS:
            if content.startswith(prefix):
                return name
    return None


def classify_messages(messages: Sequence[Mapping[str, Any]]) -> list[str]:
    """One component name per message."""
    last_user = max((i for i, m in enumerate(messages) if m.get("role") == "user" and _marker(m) is None), default=-1)
    out: list[str] = []
    for i, message in enumerate(messages):
        marked = _marker(message)
        if marked is not None:
            out.append(marked)
        elif message.get("role") in ("system", "developer"):
            out.append("system")
        elif last_user >= 0 and i >= last_user:
            out.append("query")
        else:
            out.append("history")
    return out


def component_tokens(
    counter: TokenCounter, messages: Sequence[Mapping[str, Any]], tools: Sequence[Mapping[str, Any]] | None
) -> dict[str, int]:
    """Prompt tokens per component; they add up to the request's prompt tokens (priming under query)."""
    totals = dict.fromkeys(COMPONENTS, 0)
    totals["tools"] = counter.tools(tools)
    for message, name in zip(messages, classify_messages(messages), strict=True):
        totals[name] += counter.message(message)
    totals["query"] += counter.request([], None)
    return totals
