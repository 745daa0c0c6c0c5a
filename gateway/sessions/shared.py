"""Session state shared by every replica: rows in the SQL store, optionally cached in Redis.

The tables (``session_states``, ``session_claims``) are part of the store's schema and
created by its migrations (``ventana migrate``).

Replicas behind a round-robin balancer see consecutive turns of one conversation, so the
state one replica saves must be what the next loads: ``save`` returns once its upsert is
committed (written through to Redis when configured), before the request is forwarded.
Loads and saves made while another is in flight are batched (``batcher.py``): one worker
thread hop, one SELECT or one write transaction for all of them.

``claim`` is the cross-replica "only one of us does this" primitive: the first replica
to insert a key wins (a unique key, so it works the same on SQLite and PostgreSQL);
compaction claims ``session:range_hash`` before summarising so concurrent turns never
run the summariser twice for the same checkpoint.
"""

from __future__ import annotations

import os
import socket
import time
from typing import Any, cast

import orjson
from sqlalchemy import Table, select, update
from sqlalchemy.engine import Engine
from sqlalchemy.exc import IntegrityError

from gateway.assembly.context import SessionState
from gateway.sessions.batcher import Batcher
from gateway.store.engine import insert_for, make_engine
from gateway.store.models import SessionClaim, SessionStateRow
from gateway.store.session_retention import forget_sessions

session_states = cast(Table, SessionStateRow.__table__)
session_claims = cast(Table, SessionClaim.__table__)

REDIS_TTL_S = 24 * 3600
_REDIS_PREFIX = "ventana:session:"


_IN_CHUNK = 500  # ids per IN (...) list: under SQLite's oldest limit of 999 bound parameters


def _upsert_many(engine: Engine, payloads: dict[str, str]) -> None:
    """Write every state of a batch in one transaction (one commit however many sessions)."""
    now = time.time()
    rows = [{"session_id": sid, "state": payload, "updated_at": now} for sid, payload in payloads.items()]
    stmt = insert_for(engine, session_states)
    stmt = stmt.on_conflict_do_update(
        index_elements=["session_id"], set_={"state": stmt.excluded.state, "updated_at": stmt.excluded.updated_at}
    )
    with engine.begin() as conn:
        conn.execute(stmt, rows)


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
        # Concurrent requests share a hop and a transaction (see batcher.py for the numbers).
        self._loads: Batcher[str, None, SessionState] = Batcher(self._load_many)
        self._saves: Batcher[str, SessionState, None] = Batcher(self._save_many)
        self._claims: Batcher[str, None, dict[str, str | None]] = Batcher(self._claimed_many)

    def _load_many(self, ids: dict[str, None]) -> dict[str, SessionState]:
        """The states of a batch of sessions: Redis first when configured, then one SELECT for the rest."""
        payloads: dict[str, bytes | str] = {}
        if self._redis is not None:
            cached = self._redis.mget([_REDIS_PREFIX + sid for sid in ids])
            payloads = {sid: value for sid, value in zip(ids, cached, strict=True) if value}
        missing = [sid for sid in ids if sid not in payloads]
        if missing:
            with self._engine.connect() as conn:
                for start in range(0, len(missing), _IN_CHUNK):
                    chunk = missing[start : start + _IN_CHUNK]
                    query = select(session_states.c.session_id, session_states.c.state)
                    for sid, payload in conn.execute(query.where(session_states.c.session_id.in_(chunk))):
                        payloads[sid] = payload
        found = {sid: SessionState.from_dict(orjson.loads(payload)) for sid, payload in payloads.items()}
        return {sid: found.get(sid) or SessionState(session_id=sid) for sid in ids}

    def _save_many(self, states: dict[str, SessionState]) -> dict[str, None]:
        payloads = {sid: orjson.dumps(state.to_dict()).decode() for sid, state in states.items()}
        _upsert_many(self._engine, payloads)
        if self._redis is not None:
            pipe = self._redis.pipeline(transaction=False)
            for sid, payload in payloads.items():
                pipe.set(_REDIS_PREFIX + sid, payload, ex=REDIS_TTL_S)
            pipe.execute()
        return dict.fromkeys(payloads)

    def _claim(self, key: str) -> bool:
        try:
            with self._engine.begin() as conn:
                conn.execute(session_claims.insert().values(claim_key=key, owner=self.owner, created_at=time.time()))
        except IntegrityError:
            return False
        return True

    async def load(self, session_id: str) -> SessionState:
        return await self._loads.call(session_id, None)

    async def save(self, state: SessionState) -> None:
        """Return once the state is committed: the next turn may land on another replica."""
        await self._saves.call(state.session_id, state)

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
        return self._claimed_many({prefix: None})[prefix]

    def _claimed_many(self, prefixes: dict[str, None]) -> dict[str, dict[str, str | None]]:
        """The claims under each prefix, read on one connection."""
        out: dict[str, dict[str, str | None]] = {}
        with self._engine.connect() as conn:
            for prefix in prefixes:
                escaped = prefix.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
                stmt = select(session_claims.c.claim_key, session_claims.c.result).where(
                    session_claims.c.claim_key.like(escaped + "%", escape="\\")
                )
                out[prefix] = {key: result for key, result in conn.execute(stmt)}
        return out

    async def read_claims(self, prefix: str) -> dict[str, str | None]:
        return await self._claims.call(prefix, None)

    def forget_before(self, cutoff: float) -> int:
        return forget_sessions(self._engine, cutoff)

    async def close(self) -> None:
        await self._saves.wait_idle()
        if self._redis is not None:
            self._redis.close()
        self._engine.dispose()
