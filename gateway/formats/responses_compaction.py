"""Responses API compaction, served for any model: which items a compaction replaces and how they come back.

OpenAI's ``POST /v1/responses/compact`` and ``context_management: [{"type": "compaction", ...}]`` hand the
client a ``compaction`` item whose opaque ``encrypted_content`` stands for the turns it replaced; the client
sends it back in ``input``. The gateway does the same for every model it serves: the item seals (see
``gateway/sealing.py``) the gateway's summary of the replaced turns plus the newest turns kept verbatim, and
an incoming compaction item is expanded back into those messages before anything else reads the input.

What is kept verbatim, so the model still sees the task and where it is:
- the first user message (the task) — in ``/compact``'s output, visible before the compaction item, as
  OpenAI's own output lists the user's messages;
- the newest user message and everything after it, unless that tail alone is over ``keep_tokens``; then
  only the newest items that fit, never starting on a ``function_call_output`` whose call is not kept.
Everything between is summarised. Reasoning items are dropped (their content is the provider's own, sealed
for that provider). This module is pure; the route does the counting, summarising and sealing.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from gateway.errors import RequestError
from gateway.sealing import sealed_here

COMPACTION = "compaction"
#: Codex's other way to ask (remote compaction v2): this item last in ``input`` of an ordinary ``/responses``
#: request; the answer's one output item is the compaction item, and the client keeps its own user messages.
TRIGGER = "compaction_trigger"
SEALED_KIND = "responses.compaction"
SUMMARY_HEADING = "Summary of earlier turns of this conversation (compacted by the gateway):"


def _kind(item: Mapping[str, Any]) -> str | None:
    kind = item.get("type")
    return kind if isinstance(kind, str) else ("message" if "role" in item else None)


def _is_user(item: Mapping[str, Any]) -> bool:
    return _kind(item) == "message" and item.get("role") == "user"


@dataclass(frozen=True, slots=True)
class Split:
    """A conversation cut for compaction: the task, the span to summarise, the newest items kept."""

    task: tuple[dict[str, Any], ...]
    middle: tuple[dict[str, Any], ...]
    tail: tuple[dict[str, Any], ...]


def split_items(
    items: Sequence[Mapping[str, Any]], keep_tokens: int, tokens: Callable[[Mapping[str, Any]], int]
) -> Split:
    """Cut ``items`` into the task (first user message), the middle to summarise, and the kept tail."""
    whole = [dict(i) for i in items if _kind(i) != "reasoning"]
    first = next((n for n, item in enumerate(whole) if _is_user(item)), None)
    task = [] if first is None else [whole[first]]
    rest = whole[first + 1 :] if first is not None else whole
    last_user = max((n for n, item in enumerate(rest) if _is_user(item)), default=None)
    start = last_user if last_user is not None else len(rest)
    if sum(tokens(item) for item in rest[start:]) > keep_tokens or last_user is None:
        start, room = len(rest), keep_tokens
        while start > 0 and tokens(rest[start - 1]) <= room:
            start -= 1
            room -= tokens(rest[start])
    while start < len(rest) and _kind(rest[start]) == "function_call_output":
        start += 1  # its call is summarised: an output without its call would be refused
    return Split(tuple(task), tuple(rest[:start]), tuple(rest[start:]))


def newest_round_kept(split: Split, shorten: Callable[[Mapping[str, Any], Mapping[str, Any]], dict[str, Any]]) -> Split:
    """``split`` with the newest function calls kept after all, their outputs shortened by ``shorten(call, output)``,
    when the kept tail could not hold them.

    A client that compacts in the middle of a turn (Codex, when a big tool output fills the window) continues
    the turn right after: the model must still see the call it just made, or it makes it again."""
    if any(_kind(item) == "function_call" for item in split.tail):
        return split
    middle = list(split.middle)
    start = len(middle)
    while start > 0 and _kind(middle[start - 1]) == "function_call_output":
        start -= 1
    outputs = start
    while start > 0 and _kind(middle[start - 1]) == "function_call":
        start -= 1
    if start == outputs:
        return split
    calls = {item.get("call_id"): item for item in middle[start:outputs]}
    kept = [
        shorten(calls.get(item.get("call_id")) or {}, item) if _kind(item) == "function_call_output" else item
        for item in middle[start:]
    ]
    return Split(split.task, tuple(middle[:start]), (*kept, *split.tail))


def summary_message(summary: str) -> dict[str, Any]:
    """The message a compaction's summary becomes in the conversation the model reads."""
    return {"type": "message", "role": "user", "content": f"{SUMMARY_HEADING}\n{summary}"}


def compaction_item(item_id: str, token: str) -> dict[str, Any]:
    return {"id": item_id, "type": COMPACTION, "encrypted_content": token}


def expand_compactions(items: Sequence[Any], open_sealed: Callable[[Any, str], Mapping[str, Any]]) -> list[Any] | None:
    """``items`` with each of the gateway's compaction items replaced by the messages it stands for; None
    when there is none. A provider's own compaction item is left where it is, for that provider.

    ``open_sealed(token, param)`` returns the sealed payload or raises a RequestError naming ``param``."""

    def ours(item: Any) -> bool:
        if not isinstance(item, Mapping) or item.get("type") != COMPACTION:
            return False
        return sealed_here(item.get("encrypted_content"))

    if not any(ours(item) for item in items):
        return None
    out: list[Any] = []
    for i, item in enumerate(items):
        if not ours(item):
            out.append(item)
            continue
        payload = open_sealed(item.get("encrypted_content"), f"input[{i}].encrypted_content")
        summary, kept = payload.get("summary"), payload.get("items")
        if not isinstance(summary, str) or not isinstance(kept, list):
            raise RequestError("the compaction item holds no conversation", param=f"input[{i}]")
        task = payload.get("task", 0)
        task = task if isinstance(task, int) and 0 <= task <= len(kept) else 0
        out += [*kept[:task], summary_message(summary), *kept[task:]]
    return out


def compaction_triggered(request: Mapping[str, Any]) -> bool:
    """Whether ``input`` ends with a ``compaction_trigger`` item; one anywhere else is refused, naming it."""
    given = request.get("input")
    if not isinstance(given, list):
        return False
    at = [i for i, item in enumerate(given) if isinstance(item, Mapping) and item.get("type") == TRIGGER]
    if at and at != [len(given) - 1]:
        raise RequestError("a compaction_trigger item must be the last item of input", param=f"input[{at[0]}]")
    return bool(at)


def without_users(items: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """``items`` less the user messages: what a trigger's compaction seals, since the client keeps those."""
    return [dict(item) for item in items if not _is_user(item)]


def compaction_settings(request: Mapping[str, Any]) -> int | None:
    """The ``compact_threshold`` of a ``context_management`` compaction entry, or None when none is asked.

    Refuses a malformed entry with the field named, as the API does."""
    given = request.get("context_management")
    if given is None:
        return None
    if not isinstance(given, list):
        raise RequestError("'context_management' must be an array", param="context_management")
    for i, entry in enumerate(given):
        if not isinstance(entry, Mapping) or entry.get("type") != COMPACTION:
            raise RequestError(
                "context_management entries must be objects of type 'compaction'", param=f"context_management[{i}]"
            )
        threshold = entry.get("compact_threshold")
        if threshold is None:
            return 0  # compact at the gateway's own threshold
        if not isinstance(threshold, int) or isinstance(threshold, bool) or threshold < 1:
            raise RequestError(
                "compact_threshold must be a positive integer", param=f"context_management[{i}].compact_threshold"
            )
        return threshold
    return None
