"""Session state shared by every replica: rows in the SQL store, optionally cached in Redis.

The tables (``session_states``, ``session_claims``) are part of the store's schema and
created by its migrations (``ventana migrate``).

Replicas behind a round-robin balancer see consecutive turns of one conversation, so the
state one replica saves must be what the next loads: ``save`` is a synchronous upsert
(write-through to Redis when configured) completed before the request is forwarded.

``claim`` is the cross-replica "only one of us does this" primitive: the first replica
to insert a key wins (a unique key, so it works the same on SQLite and PostgreSQL);
compaction claims ``session:range_hash`` before summarising so concurrent turns never
run the summariser twice for the same checkpoint.
"""

from __future__ import annotations

import asyncio
import os
import socket
import time
from typing import Any, cast

import orjson
from sqlalchemy import Table, select, update
from sqlalchemy.engine import Engine
from sqlalchemy.exc import IntegrityError

from gateway.assembly.context import SessionState
from gateway.store.engine import make_engine
from gateway.store.models import SessionClaim, SessionStateRow
from gateway.store.session_retention import forget_sessions

session_states = cast(Table, SessionStateRow.__table__)
session_claims = cast(Table, SessionClaim.__table__)

REDIS_TTL_S = 24 * 3600
_REDIS_PREFIX = "ventana:session:"


def _upsert(engine: Engine, session_id: str, payload: str) -> None:
    values = {"session_id": session_id, "state": payload, "updated_at": time.time()}
    if engine.dialect.name == "postgresql":
        from sqlalchemy.dialects.postgresql import insert as pg_insert

        stmt = pg_insert(session_states).values(**values)
        stmt = stmt.on_conflict_do_update(
            index_elements=["session_id"], set_={"state": stmt.excluded.state, "updated_at": stmt.excluded.updated_at}
        )
    else:
        from sqlalchemy.dialects.sqlite import insert as sqlite_insert

        lite = sqlite_insert(session_states).values(**values)
        lite = lite.on_conflict_do_update(
            index_elements=["session_id"], set_={"state": lite.excluded.state, "updated_at": lite.excluded.updated_at}
        )
        with engine.begin() as conn:
            conn.execute(lite)
        return
    with engine.begin() as conn:
        conn.execute(stmt)


class SharedSessionStore:
    blocking = True  # claims are database round trips
    """SQL-backed session state (the store's database), with an optional Redis read cache."""

    def __init__(self, database_url: str, *, redis_url: str | None = None, owner: str = "") -> None:
        self._engine = make_engine(database_url)
        self._redis: Any = None
        if redis_url:
            import redis

            self._redis = redis.Redis.from_url(redis_url)
        self.owner = (owner or f"{socket.gethostname()}:{os.getpid()}")[:64]  # who claimed what, for debugging

    def _load(self, session_id: str) -> SessionState:
        if self._redis is not None:
            cached = self._redis.get(_REDIS_PREFIX + session_id)
            if cached:
                return SessionState.from_dict(orjson.loads(cached))
        with self._engine.connect() as conn:
            row = conn.execute(select(session_states.c.state).where(session_states.c.session_id == session_id)).first()
        if row is None:
            return SessionState(session_id=session_id)
        return SessionState.from_dict(orjson.loads(row[0]))

    def _save(self, state: SessionState) -> None:
        payload = orjson.dumps(state.to_dict()).decode()
        _upsert(self._engine, state.session_id, payload)
        if self._redis is not None:
            self._redis.set(_REDIS_PREFIX + state.session_id, payload, ex=REDIS_TTL_S)

    def _claim(self, key: str) -> bool:
        try:
            with self._engine.begin() as conn:
                conn.execute(session_claims.insert().values(claim_key=key, owner=self.owner, created_at=time.time()))
        except IntegrityError:
            return False
        return True

    async def load(self, session_id: str) -> SessionState:
        return await asyncio.to_thread(self._load, session_id)

    async def save(self, state: SessionState) -> None:
        await asyncio.to_thread(self._save, state)

    def claim(self, key: str) -> bool:
        """Return True for exactly one caller per key, across every replica (blocking; call off-loop)."""
        return self._claim(key)

    def finish(self, key: str, result: str) -> None:
        """Store the winner's result on its claim; only a claim still in flight is written (append-only)."""
        stmt = (
            update(session_claims)
            .where(session_claims.c.claim_key == key, session_claims.c.result.is_(None))
            .values(result=result)
        )
        with self._engine.begin() as conn:
            conn.execute(stmt)

    def result(self, key: str) -> str | None:
        with self._engine.connect() as conn:
            row = conn.execute(select(session_claims.c.result).where(session_claims.c.claim_key == key)).first()
        return None if row is None else row[0]

    def claimed(self, prefix: str) -> dict[str, str | None]:
        escaped = prefix.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
        stmt = select(session_claims.c.claim_key, session_claims.c.result).where(
            session_claims.c.claim_key.like(escaped + "%", escape="\\")
        )
        with self._engine.connect() as conn:
            return {key: result for key, result in conn.execute(stmt)}

    def forget_before(self, cutoff: float) -> int:
        return forget_sessions(self._engine, cutoff)

    async def close(self) -> None:
        if self._redis is not None:
            self._redis.close()
        self._engine.dispose()
