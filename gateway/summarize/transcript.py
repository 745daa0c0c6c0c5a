"""Render chat messages as plain transcript lines, the input every summariser reads.

One line per message part: ``user: ...``, ``assistant: ...``, ``assistant called
search_flights({"from": "MAD"})`` and ``tool search_flights: ...``. Tool results are
named by the call they answer, so a summary can say which tool produced a fact.
The transcript is data: anything that looks like a closing ``</transcript>`` tag is
defused so a message cannot end the data block and speak as instructions.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from gateway.assembly.defuse_closers import defuse_closers
from gateway.history_fold import CHUNK, CHUNK_LIMIT, chunks
from gateway.object_memo import ObjectMemo
from gateway.tokens import content_text

#: The most characters of one message that go into a transcript line; longer text is cut.
MAX_LINE_CHARS = 4000


def _defuse(text: str) -> str:
    return defuse_closers(text)


def call_names(messages: Iterable[Mapping[str, Any]]) -> dict[str, str]:
    """``tool_call_id -> tool name`` for every call in ``messages``."""
    names: dict[str, str] = {}
    for m in messages:
        if m.get("tool_calls"):
            names.update(_CALL_NAMES.get_or(m, _message_call_names))
    return names


#: Per assistant message object: a resent history is last turn's objects (``sessions.resent``).
#: Process-wide and pure: a fact of the message's content alone (no encoding, no policy).
_CALL_NAMES: ObjectMemo[dict[str, str]] = ObjectMemo()


def _message_call_names(message: Mapping[str, Any]) -> dict[str, str]:
    names: dict[str, str] = {}
    for call in message.get("tool_calls") or ():
        if isinstance(call, Mapping):
            fn = call.get("function") or {}
            names[str(call.get("id"))] = str(fn.get("name", "")) if isinstance(fn, Mapping) else ""
    return names


def transcript_lines(messages: Sequence[Mapping[str, Any]]) -> list[tuple[str, str]]:
    """Return ``(speaker, text)`` pairs, one per non-empty message part, in order."""
    return _named_lines(messages, call_names(messages))


def _named_lines(
    messages: Sequence[Mapping[str, Any]], names: Mapping[str, str], used: list[tuple[str, str]] | None = None
) -> list[tuple[str, str]]:
    """``transcript_lines`` with the tool names given; ``used`` gets the (call id, name) of each result named."""
    lines: list[tuple[str, str]] = []
    for m in messages:
        text, calls = _LINES.get_or(m, _message_lines)
        if text:
            speaker = str(m.get("role", ""))
            if speaker == "tool":
                call = str(m.get("tool_call_id"))
                name = names.get(call, "result")
                if used is not None:
                    used.append((call, name))
                speaker = f"tool {name}"
            lines.append((speaker, text))
        lines.extend(calls)
    return lines


def _joined(lines: Iterable[tuple[str, str]]) -> str:
    return "\n".join(f"{speaker}: {text}" for speaker, text in lines)


#: Per message object, its normalised, defused text and its call lines: recall checks what the model
#: sees against the whole rendered history on every new question (~1.3 ms at 105K tokens rendered
#: afresh), and a resent history is last turn's objects. Pure, so process-wide, like ``_CALL_NAMES``.
_LINES: ObjectMemo[tuple[str, tuple[tuple[str, str], ...]]] = ObjectMemo()


def _message_lines(m: Mapping[str, Any]) -> tuple[str, tuple[tuple[str, str], ...]]:
    role = str(m.get("role", ""))
    text = " ".join(content_text(m.get("content"))[0].split())[:MAX_LINE_CHARS]
    calls: list[tuple[str, str]] = []
    for call in m.get("tool_calls") or ():
        fn = call.get("function") if isinstance(call, Mapping) else None
        if isinstance(fn, Mapping):
            args = " ".join(str(fn.get("arguments", "")).split())[:MAX_LINE_CHARS]
            calls.append((f"{role} called", _defuse(f"{fn.get('name', '')}({args})")))
    return (_defuse(text) if text else ""), tuple(calls)


def render_transcript(messages: Sequence[Mapping[str, Any]]) -> str:
    """The transcript as one text block, one ``speaker: text`` line per part."""
    return _joined(transcript_lines(messages))


def transcript_text(messages: Sequence[Mapping[str, Any]]) -> str:
    """``render_transcript(messages)`` at the cost of what changed since the same objects were rendered.

    Recall checks every new question's passages against what the model sees (``select_passages``):
    rendering a compacted 105K-token history afresh was ~200 us warm, the largest part of recall's
    540 us a request. The history is rendered per chunk (``history_fold``), each chunk's text kept with
    the tool names its results were given; a chunk is rendered again only when one of those names
    changed (the call left the history, say, summarised away)."""
    if len(messages) <= CHUNK:
        return render_transcript(messages)
    names = call_names(messages)
    parts: list[str] = []
    for chunk in chunks(messages):
        found = _CHUNK_TEXT.get(chunk)
        if found is None or any(names.get(call, "result") != name for call, name in found[1]):
            found = _CHUNK_TEXT.put(chunk, _chunk_text(chunk.messages, names))
        if found[0]:
            parts.append(found[0])
    return "\n".join(parts)


#: Per chunk (an interned ``history_fold.Chunk``): its rendered lines and the (call id, tool name) pairs
#: its results were named by. Pure and validated against each history's names, so process-wide.
_CHUNK_TEXT: ObjectMemo[tuple[str, tuple[tuple[str, str], ...]]] = ObjectMemo(limit=CHUNK_LIMIT)


def _chunk_text(
    messages: Sequence[Mapping[str, Any]], names: Mapping[str, str]
) -> tuple[str, tuple[tuple[str, str], ...]]:
    """The chunk's part of ``render_transcript`` with ``names``, and the names its results were given."""
    used: list[tuple[str, str]] = []
    return _joined(_named_lines(messages, names, used)), tuple(used)


def tool_names(messages: Sequence[Mapping[str, Any]]) -> list[str]:
    """Names of the tools called in ``messages``, first use first, without repeats."""
    return list(dict.fromkeys(n for n in call_names(messages).values() if n))
