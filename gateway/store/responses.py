"""Stored Responses: what ``previous_response_id``, ``GET``, ``DELETE`` and ``input_items`` read.

A stored response keeps only its own input items, its Response object (output included),
the response it continued and the gateway session its turn was assembled in. A chain is
rebuilt by walking ``previous_id`` links (one recursive query in SQL), so a 200-turn agent
loop stores each item once, not the whole history again on every turn (the square growth
the request store avoids too). Every read is scoped by caller: another caller's id is not
there, and a chain never crosses into another caller's responses.

Backends: in-process (one gateway process, the newest ``limit`` kept) or the store's
database (``responses`` table, shared by replicas and workers, kept across restarts),
chosen like session state (``session_state: database``).
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any, Protocol, cast

import orjson
from sqlalchemy import Table, delete, literal, select
from sqlalchemy.engine import Engine

from gateway.store.engine import make_engine
from gateway.store.models import StoredResponseRow

#: Responses one process keeps in memory; the oldest is forgotten first.
DEFAULT_MEMORY_RESPONSES = 10_000
responses_table = cast(Table, StoredResponseRow.__table__)


@dataclass(frozen=True, slots=True)
class StoredResponse:
    response_id: str
    caller: str
    previous_id: str | None
    session_id: str
    created_at: float
    items: tuple[dict[str, Any], ...]  # this request's own input items
    response: dict[str, Any]  # the Response object as returned, output included


def conversation(chain: list[StoredResponse]) -> tuple[dict[str, Any], ...]:
    """The items a turn continuing ``chain`` (oldest first) builds on: each response's input, then its output."""
    return tuple(item for s in chain for item in (*s.items, *s.response.get("output", ())))


class ResponseStore(Protocol):
    """Where stored responses live; every read sees only the caller's own."""

    async def put(self, stored: StoredResponse) -> None: ...

    async def get(self, response_id: str, caller: str) -> StoredResponse | None: ...

    async def chain(self, response_id: str, caller: str) -> list[StoredResponse]:
        """``response_id`` and the responses it continues, oldest first; empty if it is not the caller's."""
        ...

    async def delete(self, response_id: str, caller: str) -> bool: ...

    async def close(self) -> None: ...


class MemoryResponseStore:
    """Responses of this process, the ``limit`` most recently used kept (a continued chain counts as used)."""

    def __init__(self, *, limit: int = DEFAULT_MEMORY_RESPONSES) -> None:
        self.limit = limit
        self._items: OrderedDict[str, StoredResponse] = OrderedDict()

    def __repr__(self) -> str:
        return f"MemoryResponseStore(limit={self.limit}, held={len(self._items)})"

    async def put(self, stored: StoredResponse) -> None:
        """Keep ``stored`` and mark the responses it continues as used now: forgetting the oldest must
        not cut the start off a chain that is still being continued."""
        at = stored.previous_id
        while at is not None and (found := self._items.get(at)) is not None and found.caller == stored.caller:
            self._items.move_to_end(at)
            at = found.previous_id
        self._items[stored.response_id] = stored
        while len(self._items) > self.limit:
            self._items.popitem(last=False)

    async def get(self, response_id: str, caller: str) -> StoredResponse | None:
        found = self._items.get(response_id)
        return found if found is not None and found.caller == caller else None

    async def chain(self, response_id: str, caller: str) -> list[StoredResponse]:
        out: list[StoredResponse] = []
        at: str | None = response_id
        while at is not None and (found := await self.get(at, caller)) is not None:
            out.append(found)
            at = found.previous_id
        return out[::-1]

    async def delete(self, response_id: str, caller: str) -> bool:
        if await self.get(response_id, caller) is None:
            return False
        del self._items[response_id]
        return True

    async def close(self) -> None:
        self._items.clear()


def _row(stored: StoredResponse) -> dict[str, Any]:
    return {
        "response_id": stored.response_id,
        "caller": stored.caller,
        "previous_id": stored.previous_id,
        "session_id": stored.session_id,
        "created_at": stored.created_at,
        "items": orjson.dumps(stored.items).decode(),
        "response": orjson.dumps(stored.response).decode(),
    }


def _stored(row: Any) -> StoredResponse:
    return StoredResponse(
        response_id=row.response_id,
        caller=row.caller,
        previous_id=row.previous_id,
        session_id=row.session_id,
        created_at=row.created_at,
        items=tuple(orjson.loads(row.items)),
        response=orjson.loads(row.response),
    )


class SqlResponseStore:
    """Responses in the store's database; each call is one statement run in a worker thread."""

    def __init__(self, database_url: str) -> None:
        self.engine: Engine = make_engine(database_url)

    def __repr__(self) -> str:
        return f"SqlResponseStore(url={self.engine.url.render_as_string(hide_password=True)!r})"

    async def put(self, stored: StoredResponse) -> None:
        await asyncio.to_thread(self._put, _row(stored))

    def _put(self, row: dict[str, Any]) -> None:
        with self.engine.begin() as conn:
            conn.execute(responses_table.insert(), row)

    async def get(self, response_id: str, caller: str) -> StoredResponse | None:
        return await asyncio.to_thread(self._get, response_id, caller)

    def _get(self, response_id: str, caller: str) -> StoredResponse | None:
        t = responses_table
        with self.engine.connect() as conn:
            row = conn.execute(select(t).where(t.c.response_id == response_id, t.c.caller == caller)).first()
        return _stored(row) if row is not None else None

    async def chain(self, response_id: str, caller: str) -> list[StoredResponse]:
        return await asyncio.to_thread(self._chain, response_id, caller)

    def _chain(self, response_id: str, caller: str) -> list[StoredResponse]:
        """One recursive query from ``response_id`` back along ``previous_id``, within the caller's rows."""
        t = responses_table
        start = select(t.c.response_id, t.c.previous_id, literal(0).label("depth"))
        links = start.where(t.c.response_id == response_id, t.c.caller == caller).cte("chain", recursive=True)
        step = select(t.c.response_id, t.c.previous_id, (links.c.depth + 1).label("depth"))
        links = links.union_all(step.join(links, t.c.response_id == links.c.previous_id).where(t.c.caller == caller))
        query = select(t).join(links, t.c.response_id == links.c.response_id).order_by(links.c.depth.desc())
        with self.engine.connect() as conn:
            return [_stored(row) for row in conn.execute(query)]

    async def delete(self, response_id: str, caller: str) -> bool:
        return await asyncio.to_thread(self._delete, response_id, caller)

    def _delete(self, response_id: str, caller: str) -> bool:
        t = responses_table
        with self.engine.begin() as conn:
            result = conn.execute(delete(t).where(t.c.response_id == response_id, t.c.caller == caller))
        return bool(result.rowcount)

    async def close(self) -> None:
        self.engine.dispose()
