"""Shared session state: what one replica saves, another loads; a claim is won exactly once."""

from __future__ import annotations

import threading
import time
import uuid

import pytest

from gateway.assembly.context import Checkpoint, SessionState
from gateway.sessions.identify import client_session, scope_session
from gateway.sessions.shared import SharedSessionStore


async def test_state_saved_by_one_replica_is_loaded_by_another(database_url: str) -> None:
    a, b = SharedSessionStore(database_url, owner="a"), SharedSessionStore(database_url, owner="b")
    state = SessionState(
        session_id="s1", turn=3, tool_set=("x", "y"), checkpoints=(Checkpoint("h", 1, 9, "<summary>facts</summary>"),)
    )
    await a.save(state)
    assert await b.load("s1") == state
    await b.save(SessionState(session_id="s1", turn=4))
    assert (await a.load("s1")).turn == 4
    assert (await a.load("unknown")) == SessionState(session_id="unknown")
    await a.close()
    await b.close()


async def test_a_session_with_the_longest_name_a_client_may_send_is_saved(database_url: str) -> None:
    """The scoped key (a 12-character caller, ``/``, a name of up to 128) fits the 128-character column:
    PostgreSQL refused 141 characters (``StringDataRightTruncation``), so the session never saved."""
    store = SharedSessionStore(database_url, owner="a")
    key = scope_session("c00397de4384", client_session({"x-session-id": "run-" * 40}) or "")
    await store.save(SessionState(session_id=key, turn=2))
    assert (await store.load(key)).turn == 2
    await store.close()


def test_a_claim_is_won_by_exactly_one_of_many_concurrent_replicas(database_url: str) -> None:
    stores = [SharedSessionStore(database_url, owner=f"r{i}") for i in range(3)]
    wins: list[bool] = []
    barrier = threading.Barrier(6)

    def contend(store: SharedSessionStore) -> None:
        barrier.wait()
        wins.append(store.claim("s1:range-abc"))

    threads = [threading.Thread(target=contend, args=(stores[i % 3],)) for i in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(wins) == [False] * 5 + [True]
    assert stores[0].claim("s1:range-def") is True


async def test_redis_cache_serves_the_latest_state(database_url: str) -> None:
    redis = pytest.importorskip("redis")
    try:
        redis.Redis.from_url("redis://127.0.0.1:6379/0").ping()
    except redis.exceptions.ConnectionError:
        pytest.skip("no Redis server on 127.0.0.1:6379 (tests/run.sh installs and starts it)")
    sid = "redis-" + uuid.uuid4().hex[:8]
    a = SharedSessionStore(database_url, redis_url="redis://127.0.0.1:6379/0", owner="a")
    b = SharedSessionStore(database_url, redis_url="redis://127.0.0.1:6379/0", owner="b")
    await a.save(SessionState(session_id=sid, turn=7))
    assert (await b.load(sid)).turn == 7
    await a.close()
    await b.close()


def test_a_claims_result_is_written_once_and_listed_by_prefix(database_url: str) -> None:
    a, b = SharedSessionStore(database_url, owner="a"), SharedSessionStore(database_url, owner="b")
    assert a.claim("cp:s_1:h1") and a.claim("cp:s_1:h2") and a.claim("cp:s%1:h3")
    assert b.result("cp:s_1:h1") is None and b.result("never-claimed") is None
    a.finish("cp:s_1:h1", "first")
    b.finish("cp:s_1:h1", "second")  # append-only: a finished claim keeps its result
    assert b.result("cp:s_1:h1") == "first"
    # '_' and '%' in a session id are literal, not LIKE wildcards
    assert b.claimed("cp:s_1:") == {"cp:s_1:h1": "first", "cp:s_1:h2": None}
    assert b.claimed("cp:s%1:") == {"cp:s%1:h3": None}


async def test_retention_forgets_idle_sessions_and_old_claims(database_url: str) -> None:
    store = SharedSessionStore(database_url, owner="a")
    await store.save(SessionState(session_id="idle", turn=1))
    assert store.claim("cp:idle:h1")
    cutoff = time.time() + 1  # everything so far is older than this
    assert store.forget_before(cutoff) == 1
    assert await store.load("idle") == SessionState(session_id="idle")
    assert store.claimed("cp:idle:") == {} and store.claim("cp:idle:h1")
    await store.close()
