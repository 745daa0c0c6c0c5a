"""A turn adopts the checkpoints finished for its session, whichever process made them."""

from __future__ import annotations

from gateway.assembly.context import Checkpoint, SessionState
from gateway.config import Settings
from gateway.edges.compaction import CompactionRuntime
from gateway.sessions.checkpoints import checkpoint_key, publish_checkpoints
from gateway.sessions.memory import MemorySessionStore


def _runtime(store: MemorySessionStore, max_checkpoints: int = 3) -> CompactionRuntime:
    settings = Settings.model_validate({"policy": {"compaction": {"max_checkpoints": max_checkpoints}}})
    return CompactionRuntime(settings, store)


def _cp(end: int) -> Checkpoint:
    return Checkpoint(f"range-{end}", 2, end, f"summary up to {end}")


async def test_adopts_published_checkpoints_nearest_end_last_and_bounded() -> None:
    store = MemorySessionStore()
    publish_checkpoints(store, "s1", [_cp(30), _cp(10), _cp(20), _cp(40)])
    publish_checkpoints(store, "other", [_cp(50)])
    state = SessionState(session_id="s1", checkpoints=(_cp(10),))
    adopted = await _runtime(store).adopt(state)
    assert [c.end for c in adopted.checkpoints] == [20, 30, 40]
    assert await _runtime(store).adopt(adopted) is adopted, "nothing new: the same state object"


async def test_a_failed_preparation_adds_nothing_and_is_not_waited_for() -> None:
    store = MemorySessionStore()
    key = checkpoint_key("s1", "range-x")
    store.claim(key)
    store.finish(key, '{"error": "TimeoutError: summariser timed out"}')
    state = SessionState(session_id="s1")
    assert await _runtime(store).adopt(state) is state


async def test_compaction_off_reads_nothing() -> None:
    store = MemorySessionStore()
    publish_checkpoints(store, "s1", [_cp(10)])
    settings = Settings.model_validate({"policy": {"compaction": {"enabled": False}}})
    state = SessionState(session_id="s1")
    assert await CompactionRuntime(settings, store).adopt(state) is state
