"""Read conversations and cut them into the requests a client would have sent, turn by turn.

A transcript file holds one JSON conversation per line: ``{"messages": [...], "tools": [...]}``
(the format of ``shared/data``; other keys are ignored). A client sends a request after
each user message or batch of tool results that is followed by an assistant message
(or ends the conversation); consecutive user messages are separate turns.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson


@dataclass(frozen=True, slots=True)
class Conversation:
    id: str
    requests: tuple[dict[str, Any], ...]
    #: A logged session's bodies as forwarded, one per request (empty for a transcript): the summaries the
    #: gateway sent are in them (``served_summaries``).
    served: tuple[dict[str, Any], ...] = ()


def turn_ends(messages: Sequence[Mapping[str, Any]]) -> list[int]:
    """Indices (exclusive ends) where a client would send the history so far."""
    ends: list[int] = []
    for i, message in enumerate(messages):
        if message.get("role") not in ("user", "tool"):
            continue
        following = messages[i + 1].get("role") if i + 1 < len(messages) else None
        if following in (None, "assistant", "user", "system", "developer"):
            ends.append(i + 1)
    return ends


def requests_from_conversation(
    conversation: Mapping[str, Any], model: str, *, drop_ground_truth: bool = True
) -> tuple[dict[str, Any], ...]:
    messages = list(conversation.get("messages") or ())
    meta = conversation.get("meta") or {}
    if drop_ground_truth and meta.get("last_message_is_ground_truth") and messages:
        messages = messages[:-1]
    tools = conversation.get("tools") or None
    out = []
    for end in turn_ends(messages):
        body: dict[str, Any] = {"model": model, "messages": messages[:end]}
        if tools:
            body["tools"] = tools
        out.append(body)
    return tuple(out)


def read_transcripts(path: str | Path, model: str, *, limit: int | None = None) -> Iterator[Conversation]:
    with Path(path).open("rb") as fh:
        for n, line in enumerate(fh):
            if limit is not None and n >= limit:
                return
            if not line.strip():
                continue
            data = orjson.loads(line)
            yield Conversation(str(data.get("id", f"line-{n + 1}")), requests_from_conversation(data, model))


def conversations_from_store(
    engine: Any, *, session: str | None = None, since: float | None = None, limit: int = 100_000
) -> list[Conversation]:
    """Logged original requests, oldest first, one Conversation per session (replays left out)."""
    from gateway.store.queries import get_request, list_requests

    rows = [r for r in list_requests(engine, session=session, since=since, limit=limit) if r.replay_of is None]
    rows.sort(key=lambda r: (r.session_id, r.created_at))
    grouped: dict[str, list[tuple[dict[str, Any], dict[str, Any]]]] = {}
    for row in rows:
        stored = get_request(engine, row.request_id)
        if stored is not None:
            grouped.setdefault(row.session_id, []).append((stored.original, stored.assembled))
    return [
        Conversation(sid, tuple(o for o, _ in bodies), tuple(a for _, a in bodies)) for sid, bodies in grouped.items()
    ]
