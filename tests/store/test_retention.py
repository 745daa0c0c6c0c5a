"""Retention deletes old requests and only the content no remaining request references."""

from __future__ import annotations

import time

import numpy as np
from sqlalchemy import Engine, func, select, update

from gateway.assembly.tool_scoring.usage_profiles import Delta
from gateway.store.content import canonical_json
from gateway.store.models import Blob, MessageNode, Request, ToolProfile
from gateway.store.queries import get_request
from gateway.store.retention import SECONDS_PER_DAY, prune
from gateway.store.tool_profiles import ToolProfileStore
from gateway.store.writer import write_records
from tests.store.records import agent_session, make_record


def _counts(engine: Engine) -> tuple[int, int, int]:
    with engine.connect() as conn:
        return tuple(int(conn.scalar(select(func.count()).select_from(m)) or 0) for m in (Request, MessageNode, Blob))  # type: ignore[return-value]


def test_prune_keeps_content_shared_with_recent_requests_and_drops_the_rest(engine: Engine) -> None:
    now = time.time()
    old_day = now - 40 * SECONDS_PER_DAY
    session = [r.changed(created_at=old_day + i) for i, r in enumerate(agent_session(6))]
    session[-1] = session[-1].changed(created_at=now)  # the last turn is recent: it references the whole history
    lonely = make_record(
        [{"role": "user", "content": "an old one-off question"}], created_at=old_day, response_text="x1"
    )
    with engine.begin() as conn:
        write_records(conn, [*session, lonely])
    pruned = prune(engine, retention_days=30, now=now)
    assert pruned.requests == 6  # five old turns and the one-off
    kept = get_request(engine, session[-1].request_id)
    assert kept is not None
    assert canonical_json(kept.original) == canonical_json(session[-1].original)
    assert kept.response_text == session[-1].response_text
    assert get_request(engine, lonely.request_id) is None
    final = session[-1].original["messages"]
    # nodes: exactly the last request's chain; blobs: its messages, its answer, its tool list
    assert _counts(engine) == (1, len(final), len(final) + 2)
    assert pruned.nodes == 1 and pruned.blobs == 2  # the one-off's message and answer


def test_prune_with_nothing_old_changes_nothing(engine: Engine) -> None:
    with engine.begin() as conn:
        write_records(conn, list(agent_session(4)))
    before = _counts(engine)
    assert prune(engine, retention_days=1) == type(prune(engine, retention_days=1))(0, 0, 0)
    assert _counts(engine) == before


def test_prune_forgets_tool_profiles_not_updated_since_the_cutoff(engine: Engine, db_url: str) -> None:
    now = time.time()
    store = ToolProfileStore(db_url, "enc")
    store.merge({"old#1": Delta(np.ones(4, dtype=np.float32), 1), "new#1": Delta(np.ones(4, dtype=np.float32), 1)})
    with engine.begin() as conn:
        conn.execute(
            update(ToolProfile).where(ToolProfile.tool_key == "old#1").values(updated_at=now - 40 * SECONDS_PER_DAY)
        )
    pruned = prune(engine, retention_days=30, now=now)
    assert pruned.profiles == 1
    assert [p.key for p in store.load()] == ["new#1"]
    store.close()


def test_prune_forgets_recall_passages_archived_before_the_cutoff(engine: Engine) -> None:
    from gateway.memory.archive import archive, archived_count
    from gateway.store.models import MemoryPassage

    row = {"start": 1, "end": 3, "part": 0, "turn_start": 1, "turn_end": 1, "text": "user: code ZX-1", "terms": "code"}
    archive(engine, "old-session", "caller:abc", [row])
    archive(engine, "new-session", "caller:abc", [row])
    now = time.time()
    with engine.begin() as conn:
        conn.execute(
            update(MemoryPassage)
            .where(MemoryPassage.session_id == "old-session")
            .values(created_at=now - 40 * SECONDS_PER_DAY)
        )
    assert prune(engine, retention_days=30, now=now).passages == 1
    assert archived_count(engine, session_id="old-session") == 0
    assert archived_count(engine, session_id="new-session") == 1
