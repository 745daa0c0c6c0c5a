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

import asyncio
import os
import socket
import time
from collections.abc import Callable
from dataclasses import replace
from functools import partial
from typing import Any, cast

import orjson
from sqlalchemy import Table, select, update
from sqlalchemy.engine import Connection
from sqlalchemy.exc import IntegrityError

from gateway.assembly.context import SessionState
from gateway.sessions.batcher import Batcher
from gateway.sessions.merge import merge_states
from gateway.store.engine import insert_for, make_engine
from gateway.store.models import SessionClaim, SessionStateRow
from gateway.store.session_retention import forget_sessions

session_states = cast(Table, SessionStateRow.__table__)
session_claims = cast(Table, SessionClaim.__table__)

REDIS_TTL_S = 24 * 3600
_REDIS_PREFIX = "ventana:session:"


_IN_CHUNK = 500  # ids per IN (...) list: under SQLite's oldest limit of 999 bound parameters


#: Compare-and-set attempts of one save before giving up (each loses only to a save that committed).
MAX_WRITE_TRIES = 50
#: Write a cached state only over an older version: two replicas' write-throughs may land in either order.
_SET_IF_NEWER = """
local cur = redis.call('GET', KEYS[1])
if cur then
  local v = tonumber(string.match(cur, '^(%d+)\\n'))
  if v and v >= tonumber(ARGV[1]) then return 0 end
end
redis.call('SET', KEYS[1], ARGV[2], 'EX', ARGV[3])
return 1
"""


def _onto(base: SessionState | None, mine: SessionState, theirs: SessionState) -> SessionState:
    """A lost save re-applied onto the stored state (without ``base``, the whole state wins)."""
    return mine if base is None else merge_states(base, mine, theirs)


def _parse(session_id: str, payload: bytes | str, version: int) -> SessionState:
    return replace(SessionState.from_dict(orjson.loads(payload)), session_id=session_id, version=version)


def _cached(session_id: str, value: bytes) -> SessionState:
    """A Redis entry, ``<version>\\n<state>`` (an entry without a version is taken as stale: its save merges)."""
    head, sep, payload = value.partition(b"\n")
    if not sep or not head.isdigit():
        return _parse(session_id, value, -1)
    return _parse(session_id, payload, int(head))


class SharedSessionStore:
    blocking = True  # claims are database round trips
    """SQL-backed session state (the store's database), with an optional Redis read cache."""

    def __init__(self, database_url: str, *, redis_url: str | None = None, owner: str = "") -> None:
        self._engine = make_engine(database_url)
        self._redis: Any = None
        if redis_url:
            import redis

            self._redis = redis.Redis.from_url(redis_url)
            self._set_if_newer = self._redis.register_script(_SET_IF_NEWER)
        self.owner = (owner or f"{socket.gethostname()}:{os.getpid()}")[:64]  # who claimed what, for debugging
        # Concurrent requests share a hop and a transaction (see batcher.py for the numbers).
        self._loads: Batcher[str, None, SessionState] = Batcher(self._load_many)
        self._saves: Batcher[int, tuple[SessionState, SessionState | None], None] = Batcher(self._save_many)
        self._save_count = 0  # each save its own batch key: two saves of one session in a batch both merge
        self._claims: Batcher[str, None, dict[str, str | None]] = Batcher(self._claimed_many)

    def _load_many(self, ids: dict[str, None]) -> dict[str, SessionState]:
        """The states of a batch of sessions: Redis first when configured, then one SELECT for the rest."""
        found: dict[str, SessionState] = {}
        if self._redis is not None:
            cached = self._redis.mget([_REDIS_PREFIX + sid for sid in ids])
            found = {sid: _cached(sid, value) for sid, value in zip(ids, cached, strict=True) if value}
        missing = [sid for sid in ids if sid not in found]
        if missing:
            with self._engine.connect() as conn:
                for start in range(0, len(missing), _IN_CHUNK):
                    chunk = missing[start : start + _IN_CHUNK]
                    query = select(session_states.c.session_id, session_states.c.state, session_states.c.version)
                    for sid, payload, version in conn.execute(query.where(session_states.c.session_id.in_(chunk))):
                        found[sid] = _parse(sid, payload, version)
        return {sid: found.get(sid) or SessionState(session_id=sid) for sid in ids}

    def _read(self, conn: Connection, session_id: str) -> SessionState:
        """The stored state, from the database itself (never the cache): what a compare-and-set compares to."""
        query = select(session_states.c.state, session_states.c.version)
        row = conn.execute(query.where(session_states.c.session_id == session_id)).first()
        return SessionState(session_id=session_id) if row is None else _parse(session_id, row[0], row[1])

    def _write(self, conn: Connection, state: SessionState, expected: int) -> SessionState | None:
        """Store ``state`` if the stored version is still ``expected`` (0: none stored); the stored state, or None."""
        payload, now = orjson.dumps(state.to_dict()).decode(), time.time()
        if expected == 0:
            stmt = insert_for(self._engine, session_states).values(
                session_id=state.session_id, state=payload, updated_at=now, version=1
            )
            stmt = stmt.on_conflict_do_nothing(index_elements=["session_id"]).returning(session_states.c.version)
            done = conn.execute(stmt).first() is not None  # rowcount is not reliable here on every driver
        else:
            stmt = (
                update(session_states)
                .where(session_states.c.session_id == state.session_id, session_states.c.version == expected)
                .values(state=payload, updated_at=now, version=expected + 1)
            )
            done = conn.execute(stmt).rowcount == 1
        return replace(state, version=expected + 1) if done else None

    def _overwrite(self, conn: Connection, state: SessionState) -> SessionState:
        """A save without a base: the whole state wins, whatever is stored (the version still moves on)."""
        stmt = insert_for(self._engine, session_states).values(
            session_id=state.session_id, state=orjson.dumps(state.to_dict()).decode(), updated_at=time.time(), version=1
        )
        stmt = stmt.on_conflict_do_update(
            index_elements=["session_id"],
            set_={
                "state": stmt.excluded.state,
                "updated_at": stmt.excluded.updated_at,
                "version": session_states.c.version + 1,
            },
        ).returning(session_states.c.version)
        return replace(state, version=int(conn.execute(stmt).scalar_one()))

    def _apply(self, session_id: str, change: Callable[[SessionState], SessionState]) -> SessionState:
        """Read, change, compare-and-set; again from the new stored state while another save wins the race."""
        for _ in range(MAX_WRITE_TRIES):
            with self._engine.begin() as conn:
                theirs = self._read(conn, session_id)
                written = self._write(conn, change(theirs), theirs.version)
            if written is not None:
                return written
        raise RuntimeError(f"session {session_id}: {MAX_WRITE_TRIES} concurrent saves in a row won the race")

    def _save_many(self, saves: dict[int, tuple[SessionState, SessionState | None]]) -> dict[int, None]:
        """One transaction of compare-and-sets; a save that lost its race is merged and retried on its own."""
        written: list[SessionState] = []
        lost: list[tuple[SessionState, SessionState | None]] = []
        with self._engine.begin() as conn:
            for state, base in saves.values():
                done = self._write(conn, state, base.version) if base is not None else self._overwrite(conn, state)
                if done is None:
                    lost.append((state, base))
                else:
                    written.append(done)
        for state, base in lost:
            # base None: an unconditional save, the whole state wins
            written.append(self._apply(state.session_id, partial(_onto, base, state)))
        self._cache(written)
        return dict.fromkeys(saves)

    def _cache(self, states: list[SessionState]) -> None:
        if self._redis is None or not states:
            return
        pipe = self._redis.pipeline(transaction=False)
        for state in states:
            value = f"{state.version}\n".encode() + orjson.dumps(state.to_dict())
            self._set_if_newer(
                keys=[_REDIS_PREFIX + state.session_id], args=[state.version, value, REDIS_TTL_S], client=pipe
            )
        pipe.execute()

    def _claim(self, key: str) -> bool:
        try:
            with self._engine.begin() as conn:
                conn.execute(session_claims.insert().values(claim_key=key, owner=self.owner, created_at=time.time()))
        except IntegrityError:
            return False
        return True

    async def load(self, session_id: str) -> SessionState:
        return await self._loads.call(session_id, None)

    async def save(self, state: SessionState, base: SessionState | None = None) -> None:
        """Return once the state is committed: the next turn may land on another replica.

        ``base``: the state this one was made from. If another save landed since, the two merge
        (``merge.py``) rather than this one overwriting it. Without ``base`` the whole state wins."""
        self._save_count += 1
        await self._saves.call(self._save_count, (state, base))

    async def update(self, session_id: str, change: Callable[[SessionState], SessionState]) -> SessionState:
        """Apply ``change`` to the stored state atomically (compare-and-set, retried); the state stored."""
        written = await asyncio.to_thread(self._apply, session_id, change)
        await asyncio.to_thread(self._cache, [written])
        return written

    def remembered(self, keys: list[str]) -> dict[str, str]:
        """The values stored under ``keys`` by ``remember`` (any replica); absent keys are left out."""
        out: dict[str, str] = {}
        with self._engine.connect() as conn:
            for start in range(0, len(keys), _IN_CHUNK):
                query = select(session_claims.c.claim_key, session_claims.c.result)
                for key, value in conn.execute(
                    query.where(session_claims.c.claim_key.in_(keys[start : start + _IN_CHUNK]))
                ):
                    if value is not None:
                        out[key] = value
        return out

    def newest(self, prefix: str) -> str | None:
        """The value under the greatest key starting with ``prefix`` (one row read through the key's index)."""
        escaped = prefix.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
        stmt = (
            select(session_claims.c.result)
            .where(session_claims.c.claim_key.like(escaped + "%", escape="\\"), session_claims.c.result.is_not(None))
            .order_by(session_claims.c.claim_key.desc())
            .limit(1)
        )
        with self._engine.connect() as conn:
            return conn.execute(stmt).scalar()

    def remember(self, values: dict[str, str]) -> None:
        """Store each value under its key, first writer wins (append-only claims, pruned with them)."""
        if not values:
            return
        now = time.time()
        rows = [{"claim_key": k, "owner": self.owner, "created_at": now, "result": v} for k, v in values.items()]
        stmt = insert_for(self._engine, session_claims).on_conflict_do_nothing(index_elements=["claim_key"])
        with self._engine.begin() as conn:
            conn.execute(stmt, rows)

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
