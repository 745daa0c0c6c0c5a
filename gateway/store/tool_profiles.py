"""Tool usage profiles in the database: one row per (tool, encoder), merged by every worker.

A profile learnt in memory dies with its process, and with ``--workers N`` each worker would
learn alone from a 1/N share of the traffic. So each worker periodically hands its new
observations (``usage_profiles.Delta``) to ``merge``, which folds them into the shared row and
returns what the row now holds, and reads back with ``load`` the rows other workers changed.

Merges are optimistic: a row is read, folded and written back only if its ``version`` is still
the one read (a new row: only if nobody inserted it meanwhile); a lost race re-reads and folds
again. That needs no row locks, so it behaves the same on SQLite and PostgreSQL, and a merge
is never lost or counted twice. Blocking calls: run them in a worker thread.
"""

from __future__ import annotations

import random
import time
from collections.abc import Mapping
from typing import Any

import numpy as np
from sqlalchemy import Engine, and_, bindparam, delete, select, update
from sqlalchemy.exc import OperationalError

from gateway.assembly.tool_scoring.usage_profiles import DEFAULT_MAX_EXAMPLES, Delta, StoredProfile, fold
from gateway.store.engine import insert_for, make_engine
from gateway.store.models import ToolProfile

#: Attempts at a key whose row other workers keep changing under us, before the delta is given back.
MAX_ATTEMPTS = 8
#: Keys per SELECT ... IN.
CHUNK = 500
RETRY_PAUSE_S = 0.01
KEY_COLUMNS = ["tool_key", "encoder"]


class _RowMoved(Exception):
    """A row changed between this merge's SELECT and its UPDATE: another worker merged first."""


def _stored(row: Any) -> StoredProfile:
    mean = np.frombuffer(row.mean, dtype="<f4").astype(np.float32)
    return StoredProfile(row.tool_key, mean, int(row.examples), float(row.updated_at))


class ToolProfileStore:
    def __init__(self, database_url: str, encoder: str) -> None:
        self.encoder = encoder
        self._engine: Engine | None = None
        self._url = database_url

    @property
    def engine(self) -> Engine:
        if self._engine is None:
            self._engine = make_engine(self._url)
        return self._engine

    def load(self, since: float | None = None, limit: int = 10_000) -> list[StoredProfile]:
        """This encoder's profiles (those updated at or after ``since``), most recently updated last."""
        query = select(ToolProfile).where(ToolProfile.encoder == self.encoder)
        if since is not None:
            query = query.where(ToolProfile.updated_at >= since)
        query = query.order_by(ToolProfile.updated_at.desc()).limit(limit)
        with self.engine.connect() as conn:
            rows = conn.execute(query).all()
        return [_stored(r) for r in reversed(rows)]

    def merge(
        self, deltas: Mapping[str, Delta], max_examples: int = DEFAULT_MAX_EXAMPLES
    ) -> tuple[list[StoredProfile], dict[str, Delta]]:
        """Fold ``deltas`` into the stored rows; return the rows as merged and the deltas that could
        not be merged (a key other workers kept changing), for the caller to give back."""
        pending = {k: d for k, d in deltas.items() if d.count > 0}
        merged: list[StoredProfile] = []
        for attempt in range(MAX_ATTEMPTS):
            if not pending:
                break
            lost: dict[str, Delta] = {}
            keys = list(pending)
            for start in range(0, len(keys), CHUNK):
                chunk = {k: pending[k] for k in keys[start : start + CHUNK]}
                try:
                    merged.extend(self._merge_chunk(chunk, max_examples, lost))
                except OperationalError:
                    if self.engine.dialect.name != "sqlite":
                        raise  # a database that went away: the caller logs it and keeps the delta
                    lost.update(chunk)  # SQLite: another writer committed since this one read; again
            pending = lost
            if pending:  # back off, at random so racing workers do not collide again in step
                time.sleep(RETRY_PAUSE_S * (2**attempt) * random.random())
        return merged, pending

    def _merge_chunk(self, deltas: dict[str, Delta], max_examples: int, lost: dict[str, Delta]) -> list[StoredProfile]:
        """One transaction: one SELECT, one batched UPDATE (all or none: a row that moved since the
        SELECT rolls the chunk back for a retry) and one batched INSERT of the new keys (a key
        another worker inserted first is handed back, to be folded into theirs)."""
        merged: list[StoredProfile] = []
        now = time.time()
        try:
            with self.engine.begin() as conn:
                mine = and_(ToolProfile.encoder == self.encoder, ToolProfile.tool_key.in_(deltas))
                current = {r.tool_key: r for r in conn.execute(select(ToolProfile).where(mine))}
                updates: list[dict[str, Any]] = []
                inserts: list[dict[str, Any]] = []
                for key, delta in deltas.items():
                    row = current.get(key)
                    if row is None:
                        mean, n = fold(None, 0, delta, max_examples)
                        inserts.append(self._values(key, mean, n, 1, now))
                    else:
                        old = _stored(row)
                        mean, n = fold(old.mean, old.examples, delta, max_examples)
                        values = self._values(key, mean, n, row.version + 1, now)
                        del values["tool_key"], values["encoder"]  # the SET clause is what remains
                        updates.append({**values, "b_key": key, "b_seen": row.version})
                    merged.append(StoredProfile(key, mean, n, now))
                if updates and conn.execute(self._update, updates).rowcount != len(updates):
                    raise _RowMoved
                if inserts:
                    stmt = insert_for(self.engine, ToolProfile).on_conflict_do_nothing(index_elements=KEY_COLUMNS)
                    won = set(conn.execute(stmt.returning(ToolProfile.tool_key), inserts).scalars())
                    lost.update({v["tool_key"]: deltas[v["tool_key"]] for v in inserts if v["tool_key"] not in won})
        except _RowMoved:
            lost.update(deltas)
            return []
        return [m for m in merged if m.key not in lost]

    @property
    def _update(self) -> Any:
        """The row of this encoder with key ``b_key`` if still at version ``b_seen`` (SET: the other keys)."""
        return update(ToolProfile).where(
            and_(
                ToolProfile.tool_key == bindparam("b_key"),
                ToolProfile.encoder == self.encoder,
                ToolProfile.version == bindparam("b_seen"),
            )
        )

    def _values(self, key: str, mean: np.ndarray, examples: int, version: int, now: float) -> dict[str, Any]:
        return {
            "tool_key": key,
            "encoder": self.encoder,
            "dim": int(mean.shape[0]),
            "mean": np.asarray(mean, dtype="<f4").tobytes(),
            "examples": examples,
            "version": version,
            "updated_at": now,
        }

    def close(self) -> None:
        if self._engine is not None:
            self._engine.dispose()


def list_profiles(engine: Engine) -> list[dict[str, Any]]:
    """Every stored profile, most used first (``ventana tools profiles``)."""
    query = select(ToolProfile.tool_key, ToolProfile.encoder, ToolProfile.examples, ToolProfile.updated_at).order_by(
        ToolProfile.examples.desc(), ToolProfile.tool_key
    )
    with engine.connect() as conn:
        return [
            {"tool": key.split("#")[0], "key": key, "encoder": encoder, "examples": examples, "updated_at": updated}
            for key, encoder, examples, updated in conn.execute(query)
        ]


def forget_profiles(engine: Engine, tool: str) -> int:
    """Delete the profiles of every definition of the tool named ``tool``; return how many went.

    For a tool the model kept calling by mistake: its profile would keep it in the kept set. A
    running gateway keeps its in-memory copy until it restarts.
    """
    with engine.begin() as conn:
        done = conn.execute(delete(ToolProfile).where(ToolProfile.tool_key.like(_like_prefix(tool), escape="\\")))
    return int(done.rowcount or 0)


def _like_prefix(tool: str) -> str:
    escaped = tool.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return escaped + "#%"
