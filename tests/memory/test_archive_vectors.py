"""An archive's vectors come a bounded number at a time, newest first, decided by the turns alone.

The session's next turn waits for its archive task, so a first compaction of a long history would hold
that turn for every passage's embedding (~35 s for a 105K-token agent history). The real encoder
(MiniLM) on SQLite and PostgreSQL; the edge's own archive task through ``learn`` and ``drain``.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
from sqlalchemy import Engine, select

from gateway.assembly.context import Decision
from gateway.config import parse_settings
from gateway.edges.memory import MemoryRuntime
from gateway.memory import vectors
from gateway.memory.archive import archive, embed_missing, passages_of, passages_table
from gateway.tokens import counter_for
from tests.assembly.make_context import make_context
from tests.store.conftest import blank_url, db_url

__all__ = ["blank_url", "db_url"]

COUNT = counter_for("o200k_base").text
TOPICS = ["a beagle called Rex", "the flight to Lisbon", "seat 22A", "the hotel in Alfama", "a rental car", "dinner"]
HISTORY: list[dict[str, Any]] = [{"role": "system", "content": "You plan trips."}]
for k, topic in enumerate(TOPICS):
    HISTORY += [
        {"role": "user", "content": f"Turn {k}: remember {topic}."},
        {"role": "assistant", "content": f"Noted: {topic}."},
    ]
HISTORY.append({"role": "user", "content": "What did I say about the car?"})


def _with_vectors(engine: Engine, session_id: str) -> list[int]:
    """The starts of the session's passages that have a vector, in order."""
    t = passages_table.c
    query = select(t.start).where(t.session_id == session_id, t.vector.is_not(None)).order_by(t.start)
    with engine.connect() as conn:
        return [r.start for r in conn.execute(query)]


def test_passages_are_given_vectors_newest_first_a_bounded_number_at_a_time(engine: Engine) -> None:
    rows = passages_of(HISTORY, 1, 13, 300, COUNT)
    assert [r["start"] for r in rows] == [1, 3, 5, 7, 9, 11]
    assert archive(engine, "s", "caller:x", rows) == 6
    assert archive(engine, "s", "caller:x", rows) == 0, "archived again (re-compaction): nothing new"
    assert _with_vectors(engine, "s") == []
    assert embed_missing(engine, "s", 2) == 2
    assert _with_vectors(engine, "s") == [9, 11]
    assert embed_missing(engine, "s", 3) == 3
    assert _with_vectors(engine, "s") == [3, 5, 7, 9, 11]
    assert embed_missing(engine, "s", 3) == 1
    assert embed_missing(engine, "s", 3) == 0
    t = passages_table.c
    with engine.connect() as conn:
        stored = conn.execute(select(t.text, t.vector).where(t.session_id == "s").order_by(t.start)).all()
    encoded = vectors.encode([r.text for r in stored])
    assert encoded is not None
    for row, vector in zip(stored, encoded, strict=True):  # the same vectors as embedding each passage at once
        restored = vectors.from_bytes(row.vector)
        assert restored is not None and np.allclose(restored, vector, atol=2e-3)


@pytest.fixture
def bounded(db_url: str) -> Iterator[MemoryRuntime]:
    memory = MemoryRuntime(parse_settings({"database_url": db_url, "policy": {"memory": {"embed_per_archive": 2}}}))
    yield memory
    memory.close()


def _compacted(end: int) -> list[Decision]:
    return [Decision("compact_history", "compacted", detail={"start": 1, "end": end})]


async def _learn(memory: MemoryRuntime, end: int) -> None:
    ctx = make_context({"messages": HISTORY})
    memory.learn(ctx, _compacted(end), {}, "caller-a")
    await memory.drain()


async def test_an_archive_embeds_at_most_its_bound_and_the_next_archives_go_on(bounded: MemoryRuntime) -> None:
    await _learn(bounded, 9)  # turns 0-3 archived: the two newest get vectors
    assert _with_vectors(bounded.engine, "test-session") == [5, 7]
    await _learn(bounded, 13)  # turns 4-5 added: they are now the newest without one
    assert _with_vectors(bounded.engine, "test-session") == [5, 7, 9, 11]
    await _learn(bounded, 13)  # nothing new compacted: no archive, no vectors
    assert _with_vectors(bounded.engine, "test-session") == [5, 7, 9, 11]


async def test_a_replica_that_offers_archived_rows_again_embeds_what_one_gateway_would(
    bounded: MemoryRuntime, db_url: str
) -> None:
    await _learn(bounded, 9)
    assert _with_vectors(bounded.engine, "test-session") == [5, 7]
    # Another process has not seen this session: it offers the whole range again, and adds nothing.
    replica = MemoryRuntime(parse_settings({"database_url": db_url, "policy": {"memory": {"embed_per_archive": 2}}}))
    try:
        await _learn(replica, 9)
        assert _with_vectors(bounded.engine, "test-session") == [5, 7], "no new passage: no vector either"
        await _learn(replica, 13)
        assert _with_vectors(bounded.engine, "test-session") == [5, 7, 9, 11]
    finally:
        replica.close()
