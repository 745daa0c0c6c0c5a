"""Stored Responses: what ``previous_response_id``, ``GET``, ``DELETE`` and ``input_items`` read.

A stored response keeps the whole conversation it answered (every earlier item, then its
own input), its output, and the session the chat pipeline gave it, so the next turn of a
chain is rebuilt without walking the chain and lands in the same gateway session (its
compaction checkpoints and sticky tools). Every read is scoped by caller: another caller's
id is simply not there.

Backends: in-process (one gateway process, bounded, the newest kept) or the store's
database (``responses`` table, shared by replicas and kept across restarts).
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass
from typing import Any, Protocol

#: Responses one process keeps in memory; the oldest is forgotten first.
DEFAULT_MEMORY_RESPONSES = 10_000


@dataclass(frozen=True, slots=True)
class StoredResponse:
    response_id: str
    caller: str
    session_id: str
    created_at: float
    conversation: tuple[dict[str, Any], ...]  # earlier items, then this request's input items
    input_count: int  # how many of the conversation's last items were this request's input
    response: dict[str, Any]  # the Response object as returned, output included

    def items(self) -> tuple[dict[str, Any], ...]:
        """The conversation the next turn continues: everything before, then this response's output."""
        return (*self.conversation, *self.response.get("output", ()))

    def own_input(self) -> tuple[dict[str, Any], ...]:
        return self.conversation[len(self.conversation) - self.input_count :]


class ResponseStore(Protocol):
    """Where stored responses live; ``get`` and ``delete`` see only the caller's own."""

    async def put(self, stored: StoredResponse) -> None: ...

    async def get(self, response_id: str, caller: str) -> StoredResponse | None: ...

    async def delete(self, response_id: str, caller: str) -> bool: ...

    async def close(self) -> None: ...


class MemoryResponseStore:
    """Responses of this process, the newest ``limit`` kept."""

    def __init__(self, *, limit: int = DEFAULT_MEMORY_RESPONSES) -> None:
        self.limit = limit
        self._items: OrderedDict[str, StoredResponse] = OrderedDict()

    def __repr__(self) -> str:
        return f"MemoryResponseStore(limit={self.limit}, held={len(self._items)})"

    async def put(self, stored: StoredResponse) -> None:
        self._items[stored.response_id] = stored
        while len(self._items) > self.limit:
            self._items.popitem(last=False)

    async def get(self, response_id: str, caller: str) -> StoredResponse | None:
        found = self._items.get(response_id)
        return found if found is not None and found.caller == caller else None

    async def delete(self, response_id: str, caller: str) -> bool:
        if await self.get(response_id, caller) is None:
            return False
        del self._items[response_id]
        return True

    async def close(self) -> None:
        self._items.clear()
