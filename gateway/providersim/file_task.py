"""The simulated model doing a file task the way a coding agent's model does: write the file, read it back.

Coding agents (Claude Code, Codex) offer dozens of tools whose long descriptions share words with
any request, so the word-overlap choice of ``choose_tool`` would call whichever mentions "file"
most. A request that asks to create a file with some content (``Create the file notes.txt
containing ventana-42, then read it back``) is planned instead, by what the tools take rather
than what they are called: a tool with a path and a content parameter writes, one whose only
required parameter is a path reads. Paths are made absolute against the working directory the
agent's system prompt states (agents refuse relative ones). Once the steps ran, the model
answers in text and quotes the last result, so a test can see the file's content came back.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from gateway.providersim.schema_values import mapping
from gateway.tokens import content_text

_TASK = re.compile(
    r"\b(?:create|write)\s+(?:a\s+|the\s+)?(?:new\s+)?file\s+(?:named\s+|called\s+)?[`'\"]?(?P<path>[\w./-]+\.\w+)[`'\"]?"
    r"\s+(?:containing|with(?:\s+the)?(?:\s+content|\s+text)?)\s+[`'\"]?(?P<content>.+?)[`'\"]?"
    r"(?=,?\s+(?:then|and then)\b|[.;]?\s*$)",
    re.IGNORECASE | re.DOTALL,
)
_READ_BACK = re.compile(r"\bread\b|\bshow\b|\bprint\b|\bcat\b", re.IGNORECASE)
_CWD = re.compile(r"(?:working directory|cwd)\s*:\s*(/[^\s]+)", re.IGNORECASE)
_PATH_KEYS = ("file_path", "path", "filepath", "filename")
_CONTENT_KEYS = ("content", "contents", "text", "data")


def _params(fn: Mapping[str, Any]) -> tuple[set[str], set[str]]:
    schema = mapping(fn.get("parameters"))
    props = mapping(schema.get("properties"))
    found = schema.get("required")
    required: list[Any] = found if isinstance(found, list) else []
    return set(props), {str(r) for r in required}


def _key(keys: set[str], wanted: Sequence[str]) -> str | None:
    return next((k for k in wanted if k in keys), None)


def _writer(fns: Sequence[Mapping[str, Any]]) -> tuple[str, str, str] | None:
    for fn in fns:
        props, required = _params(fn)
        path, content = _key(props, _PATH_KEYS), _key(props, _CONTENT_KEYS)
        if path and content and required <= {path, content}:
            return str(fn["name"]), path, content
    return None


def _reader(fns: Sequence[Mapping[str, Any]]) -> tuple[str, str] | None:
    candidates = []
    for fn in fns:
        props, required = _params(fn)
        path = _key(props, _PATH_KEYS)
        if path and required == {path} and not _key(props, _CONTENT_KEYS):
            named = "read" in str(fn.get("name", "")).lower()
            candidates.append((not named, str(fn["name"]), path))
    return min(candidates)[1:] if candidates else None


def working_directory(messages: Sequence[Mapping[str, Any]]) -> str | None:
    for m in messages:
        if m.get("role") in ("system", "developer", "user"):
            found = _CWD.search(content_text(m.get("content"))[0])
            if found:
                return found.group(1).rstrip(".,")
    return None


def file_task(need: str) -> tuple[str, str, bool] | None:
    """(path, content, read back?) when ``need`` asks for a file to be created with some content."""
    found = _TASK.search(need)
    if found is None:
        return None
    after = need[found.end() :]
    return found.group("path"), found.group("content").strip(), bool(_READ_BACK.search(after))


def plan_file_task(
    need: str, fns: Sequence[Mapping[str, Any]], messages: Sequence[Mapping[str, Any]], called: Sequence[str]
) -> list[tuple[str, dict[str, Any]]] | None:
    """The next call of a file task, [] once it is done, or None when ``need`` is no file task."""
    task = file_task(need)
    writer = _writer(fns)
    if task is None or writer is None:
        return None
    path, content, read_back = task
    cwd = working_directory(messages)
    if not path.startswith("/") and cwd:
        path = cwd.rstrip("/") + "/" + path
    name, path_key, content_key = writer
    if name not in called:
        return [(name, {path_key: path, content_key: content})]
    reader = _reader(fns)
    if read_back and reader is not None and reader[0] not in called:
        return [(reader[0], {reader[1]: path})]
    return []
