"""Concurrent session loads and saves share a worker-thread hop and a transaction, and lose nothing."""

from __future__ import annotations

import asyncio
import threading

import pytest
from sqlalchemy import event

from gateway.assembly.context import SessionState
from gateway.sessions.batcher import Batcher
from gateway.sessions.shared import SharedSessionStore


class HeldRun:
    """A batch function whose first batch waits for ``release``, so later calls pile up behind it."""

    def __init__(self, fail_on: str | None = None) -> None:
        self.batches: list[dict[str, int]] = []
        self.release = threading.Event()
        self.fail_on = fail_on

    def __call__(self, batch: dict[str, int]) -> dict[str, int]:
        self.batches.append(dict(batch))
        if len(self.batches) == 1:
            self.release.wait(5)
        if self.fail_on in batch:
            raise RuntimeError(f"database down while writing {self.fail_on}")
        return {key: value * 10 for key, value in batch.items()}


async def test_calls_made_during_a_batch_run_together_in_the_next() -> None:
    run = HeldRun()
    batcher: Batcher[str, int, int] = Batcher(run)
    first = asyncio.create_task(batcher.call("a", 1))
    await asyncio.sleep(0.05)  # the first batch is in its thread, held
    later = [asyncio.create_task(batcher.call(key, value)) for key, value in [("b", 2), ("c", 3), ("b", 4)]]
    await asyncio.sleep(0.05)
    run.release.set()
    assert await first == 10
    # "b" twice in one batch runs once with the later argument; both callers get its result
    assert await asyncio.gather(*later) == [40, 30, 40]
    assert run.batches == [{"a": 1}, {"b": 4, "c": 3}]


async def test_a_failed_batch_fails_each_of_its_callers_and_the_next_batch_runs() -> None:
    run = HeldRun(fail_on="b")
    batcher: Batcher[str, int, int] = Batcher(run)
    first = asyncio.create_task(batcher.call("a", 1))
    await asyncio.sleep(0.05)
    doomed = [asyncio.create_task(batcher.call(key, 1)) for key in ("b", "c")]
    await asyncio.sleep(0.05)
    run.release.set()
    assert await first == 10
    for task in doomed:
        with pytest.raises(RuntimeError, match="database down"):
            await task
    assert await batcher.call("d", 5) == 50


async def test_a_caller_that_goes_away_does_not_cancel_the_write() -> None:
    run = HeldRun()
    batcher: Batcher[str, int, int] = Batcher(run)
    first = asyncio.create_task(batcher.call("a", 1))
    await asyncio.sleep(0.05)
    first.cancel()
    run.release.set()
    await batcher.wait_idle()
    assert run.batches == [{"a": 1}]


async def test_concurrent_saves_commit_together_and_every_state_loads_back(database_url: str) -> None:
    store = SharedSessionStore(database_url, owner="a")
    commits: list[int] = []
    event.listen(store._engine, "commit", lambda _conn: commits.append(1))
    states = [SessionState(session_id=f"batch-{i}", turn=i, tool_set=(f"tool{i}",)) for i in range(40)]
    # the same session saved twice in a row: the later state is the one kept
    await asyncio.gather(*(store.save(s) for s in states), store.save(SessionState(session_id="batch-3", turn=99)))
    assert 1 <= len(commits) < 20  # 41 saves: one transaction per batch, not per save
    other = SharedSessionStore(database_url, owner="b")
    loaded = await asyncio.gather(*(other.load(s.session_id) for s in states), other.load("never-saved"))
    assert loaded[:3] == states[:3] and loaded[4:40] == states[4:]
    assert loaded[3] == SessionState(session_id="batch-3", turn=99)
    assert loaded[40] == SessionState(session_id="never-saved")
    await store.close()
    await other.close()


async def test_concurrent_claim_reads_share_a_connection_and_match_the_blocking_read(database_url: str) -> None:
    store = SharedSessionStore(database_url, owner="a")
    checkouts: list[int] = []
    event.listen(store._engine, "checkout", lambda *_args: checkouts.append(1))
    for i in range(10):
        assert store.claim(f"cp:reader-{i}:h1")
        store.finish(f"cp:reader-{i}:h1", f"summary {i}")
    assert store.claim("cp:reader-3:h2")  # still in flight: no result yet
    checkouts.clear()
    read = await asyncio.gather(*(store.read_claims(f"cp:reader-{i}:") for i in range(10)))
    assert len(checkouts) < 10
    assert read == [store.claimed(f"cp:reader-{i}:") for i in range(10)]
    assert read[3] == {"cp:reader-3:h1": "summary 3", "cp:reader-3:h2": None}
    await store.close()
