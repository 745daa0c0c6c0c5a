"""Finished checkpoints are stored append-only and read back by every replica."""

from __future__ import annotations

import threading
import time

from gateway.assembly.context import Checkpoint
from gateway.sessions.checkpoints import (
    checkpoint_key,
    checkpoint_result,
    failed_result,
    publish_checkpoints,
    published_checkpoints,
)
from gateway.sessions.memory import MemorySessionStore
from gateway.sessions.shared import SharedSessionStore

CP = Checkpoint("range-a", 2, 9, "user booked IB3170", "llm:test")
CP2 = Checkpoint("range-b", 2, 14, "user booked IB3170; paid 120 EUR", "llm:test")


async def test_a_checkpoint_published_by_one_replica_is_read_by_another(database_url: str) -> None:
    a, b = SharedSessionStore(database_url, owner="a"), SharedSessionStore(database_url, owner="b")
    publish_checkpoints(a, "s1", [CP])
    publish_checkpoints(b, "s1", [Checkpoint("range-a", 2, 9, "a different summary of the same range")])
    assert await published_checkpoints(b, "s1", wait_s=1) == [CP], "the first checkpoint of a range wins"
    assert await published_checkpoints(b, "s2", wait_s=1) == []


async def test_a_checkpoint_in_flight_is_waited_for(database_url: str) -> None:
    a, b = SharedSessionStore(database_url, owner="a"), SharedSessionStore(database_url, owner="b")
    key = checkpoint_key("s1", CP2.range_hash)
    assert a.claim(key)
    finisher = threading.Timer(0.3, lambda: a.finish(key, checkpoint_result(CP2)))
    finisher.start()
    started = time.monotonic()
    assert await published_checkpoints(b, "s1", wait_s=10) == [CP2]
    assert 0.2 < time.monotonic() - started < 10
    finisher.join()


async def test_failed_and_abandoned_preparations_yield_no_checkpoint() -> None:
    store = MemorySessionStore()
    store.claim(checkpoint_key("s1", "failed"))
    store.finish(checkpoint_key("s1", "failed"), failed_result(TimeoutError("summariser timed out")))
    store.claim(checkpoint_key("s1", "abandoned"))
    assert await published_checkpoints(store, "s1", wait_s=0.1) == []
    assert "did not finish" in (store.result(checkpoint_key("s1", "abandoned")) or "")
