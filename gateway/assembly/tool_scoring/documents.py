"""The texts a scorer compares: what a tool is about, and what the current turn asks for.

A tool is described by its name split into words (``getWeather_v2`` -> ``get Weather v2``),
its description and its parameters' names and descriptions. The turn is the last user
message, the latest tool results after it (the agent is mid-task: what came back says
what it needs next) and the assistant's latest text.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from functools import lru_cache
from typing import Any

from gateway.assembly.message_text import user_indices
from gateway.json_memo import memo_by_json
from gateway.object_memo import ObjectMemo
from gateway.tokens import content_text

#: Characters taken from one tool result: results can be megabytes of JSON, the gist is early.
MAX_RESULT_CHARS = 2_000
_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])")
_SEPARATORS = re.compile(r"[_.\-/:]+")


def split_identifier(name: str) -> str:
    """Split snake_case, camelCase, dotted and dashed identifiers into words.

    >>> split_identifier("getWeather_forCity.v2")
    'get Weather for City v2'
    """
    return " ".join(_CAMEL.sub(" ", _SEPARATORS.sub(" ", name)).split())


def tool_name(tool: Mapping[str, Any]) -> str:
    """The name a model calls the tool by (function name, or a non-function tool's name/type)."""
    fn = tool.get("function")
    if fn.__class__ is dict and fn.get("name"):  # parsed JSON: skip the ABC check, ~10x slower
        return str(fn["name"])
    if isinstance(fn, Mapping) and fn.get("name"):
        return str(fn["name"])
    return str(tool.get("name") or tool.get("type") or "")


#: Per tool object: a tool list resent unchanged is last turn's objects (``sessions.resent``).
#: Process-wide and pure: the text of the tool's content alone (no encoding, no policy).
_DOCUMENTS: ObjectMemo[str] = ObjectMemo()


def tool_document(tool: Mapping[str, Any]) -> str:
    """The text a tool is scored on: split name, description, parameter names and descriptions."""
    return _DOCUMENTS.get_or(tool, _tool_document)


def _tool_document(tool: Mapping[str, Any]) -> str:
    fn = tool.get("function") if isinstance(tool.get("function"), Mapping) else tool
    assert isinstance(fn, Mapping)
    return _document(tool_name(tool), str(fn.get("description") or ""), _schema_text(fn.get("parameters")))


@memo_by_json(limit=20_000)  # tools are resent unchanged every turn: walk each schema once
def _schema_text(schema: Any) -> str:
    return _param_text(schema)


# Process-wide and pure: a function of strings.
@lru_cache(maxsize=20_000)
def _document(name: str, description: str, params: str) -> str:
    head = split_identifier(name)
    return f"{head}: {description} {params}".strip()


def _param_text(schema: Any, depth: int = 0) -> str:
    if not isinstance(schema, Mapping) or depth > 2:
        return ""
    props = schema.get("properties")
    if not isinstance(props, Mapping):
        return ""
    parts: list[str] = []
    for key, spec in props.items():
        parts.append(split_identifier(str(key)))
        if isinstance(spec, Mapping):
            if spec.get("description"):
                parts.append(str(spec["description"]))
            parts.append(_param_text(spec, depth + 1))
    return " ".join(p for p in parts if p)


def query_text(messages: Sequence[Mapping[str, Any]]) -> str:
    """The current turn's text: last user message, the latest tool results, the last assistant text.

    The latest results are those answering the last assistant message that called tools
    (one batch, parallel calls included), not every result since the user spoke: in a long
    agent loop that would be hundreds of results, the query would grow every turn (and its
    scoring with it), and the old results say less about what is needed next.
    """
    users = user_indices(messages)
    last_user = users[-1] if users else -1
    parts: list[str] = []
    if last_user >= 0:
        parts.append(content_text(messages[last_user].get("content"))[0])
        last_call = next(
            (i for i in range(len(messages) - 1, last_user, -1) if messages[i].get("tool_calls")), last_user
        )
        for m in messages[last_call + 1 :]:
            if m.get("role") == "tool":
                parts.append(content_text(m.get("content"))[0][:MAX_RESULT_CHARS])
    for m in reversed(messages):
        if m.get("role") == "assistant":
            text = content_text(m.get("content"))[0]
            if text:
                parts.append(text)
                break
    return "\n".join(p for p in parts if p.strip())
