"""Read and rewrite the text of a message's content, whether a string or a list of parts.

OpenAI content is either a string or a list of typed parts (``text``, ``image_url``,
``input_audio``, ...). Passes that edit text (volatile values, rules, cache markers)
must keep the shape the client chose and leave non-text parts untouched, so they go
through these two functions instead of assuming a string.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from gateway.history_fold import index_fold
from gateway.object_memo import ObjectMemo

SYSTEM_ROLES = ("system", "developer")


def text_of(content: Any) -> str:
    """The content's text: the string itself, or its text parts joined with newlines."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(str(p.get("text", "")) for p in content if isinstance(p, Mapping) and p.get("type") == "text")
    return ""


def map_text(content: Any, rewrite: Callable[[str], str]) -> Any:
    """Apply ``rewrite`` to every text of ``content``; return the same object when nothing changed.

    Parts are copied only when their text changes, so unchanged parts (and images) are
    shared with the input, which is never mutated.
    """
    if isinstance(content, str):
        return rewrite(content)
    if not isinstance(content, list):
        return content
    changed = False
    parts: list[Any] = []
    for part in content:
        if isinstance(part, Mapping) and part.get("type") == "text" and isinstance(part.get("text"), str):
            new_text = rewrite(part["text"])
            if new_text != part["text"]:
                part = {**part, "text": new_text}
                changed = True
        parts.append(part)
    return parts if changed else content


def with_content(message: Mapping[str, Any], content: Any) -> Mapping[str, Any]:
    """The message with ``content`` replaced; the same object when the content is the same object."""
    if content is message.get("content"):
        return message
    return {**message, "content": content}


def is_system(message: Mapping[str, Any]) -> bool:
    return message.get("role") in SYSTEM_ROLES


#: Where the system messages of a message tuple are. Several passes ask in turn about the
#: same tuple (a Context's messages), so a long history is walked once per tuple, not once
#: per question; holding the tuples keeps their ids their own while remembered. Only needed
#: within a request (a few tuples each), so the limit is small: a tuple holds its history.
#: Process-wide and pure: roles of the tuple's messages alone (no encoding, no policy).
_SYSTEM_AT: ObjectMemo[tuple[int, ...]] = ObjectMemo(limit=256)


def system_indices(messages: Sequence[Mapping[str, Any]]) -> tuple[int, ...]:
    """Indices of the system/developer messages, in order."""
    if messages.__class__ is tuple:
        return _SYSTEM_AT.get_or(messages, _system_indices)
    return _system_indices(messages)


#: Both remembered per chunk of history (``gateway.history_fold``): a turn walks what is new.
_system_indices = index_fold(lambda m: m.get("role") in SYSTEM_ROLES)
user_indices = index_fold(lambda m: m.get("role") == "user")
user_indices.__doc__ = "Indices of the user messages (gateway blocks with the user role included), in order."


def system_messages(messages: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """The system/developer messages, in order (gateway blocks included)."""
    return [messages[i] for i in system_indices(messages)]
