"""Tool usage profiles in the database: merged by several workers at once, read back, kept apart by encoder."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import numpy as np
import pytest
from sqlalchemy import select

from gateway.assembly.tool_scoring.usage_profiles import Delta
from gateway.config import parse_settings
from gateway.edges.tool_usage import ToolUsageRuntime
from gateway.store.engine import make_engine
from gateway.store.models import ToolProfile
from gateway.store.tool_profiles import ToolProfileStore, forget_profiles, list_profiles


def unit(*values: float) -> np.ndarray:
    v = np.array(values, dtype=np.float32)
    return v / np.linalg.norm(v)


def store(db_url: str, encoder: str = "enc-a") -> ToolProfileStore:
    return ToolProfileStore(db_url, encoder)


def test_merges_from_two_workers_add_up(db_url: str) -> None:
    a, b = store(db_url), store(db_url)
    merged, lost = a.merge({"t#1": Delta(unit(1, 0) * 2, 2)})
    assert not lost and [(m.key, m.examples) for m in merged] == [("t#1", 2)]
    merged, lost = b.merge({"t#1": Delta(unit(0, 1), 1), "u#1": Delta(unit(0, 1), 1)})
    assert not lost
    rows = {p.key: p for p in a.load()}
    assert rows["t#1"].examples == 3 and rows["u#1"].examples == 1
    np.testing.assert_allclose(rows["t#1"].mean, (2 * unit(1, 0) + unit(0, 1)) / 3, atol=1e-6)
    a.close()
    b.close()


def test_concurrent_merges_into_one_row_lose_nothing(db_url: str) -> None:
    """Eight workers merging into the same rows at once: every example counted exactly once."""
    rounds, workers = 12, 8
    results: list[dict[str, Delta]] = []
    errors: list[BaseException] = []

    def work(i: int) -> None:
        s = store(db_url)
        try:
            for _ in range(rounds):
                _, lost = s.merge({"t#1": Delta(unit(1, i), 1), f"w{i}#1": Delta(unit(0, 1), 1)})
                results.append(lost)
        except BaseException as exc:  # surfaced below
            errors.append(exc)
        finally:
            s.close()

    threads = [threading.Thread(target=work, args=(i,)) for i in range(workers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    unmerged = sum(d.count for lost in results for k, d in lost.items() if k == "t#1")
    rows = {p.key: p for p in store(db_url).load()}
    assert rows["t#1"].examples + unmerged == rounds * workers  # merged or handed back, never both or neither
    for lost in results:  # what a worker had to hand back, it merges at its next sync
        if lost:
            assert not store(db_url).merge(lost)[1]
    rows = {p.key: p for p in store(db_url).load()}
    assert rows["t#1"].examples == rounds * workers
    expected = np.mean([unit(1, i) for i in range(workers) for _ in range(rounds)], axis=0)
    np.testing.assert_allclose(rows["t#1"].mean, expected, atol=1e-5)  # 96 examples, under the 200 cap: exact
    assert all(rows[f"w{i}#1"].examples == rounds for i in range(workers))


def test_load_reads_only_this_encoder_and_what_changed_since(db_url: str) -> None:
    a, other = store(db_url), store(db_url, encoder="enc-b")
    a.merge({"t#1": Delta(unit(1, 0), 1)})
    other.merge({"t#1": Delta(unit(0, 1), 5)})
    assert [(p.key, p.examples) for p in a.load()] == [("t#1", 1)]
    assert [(p.key, p.examples) for p in other.load()] == [("t#1", 5)]
    newest = a.load()[0].updated_at
    assert a.load(since=newest + 1) == []
    a.merge({"u#1": Delta(unit(1, 1), 1)})
    assert {p.key for p in a.load(since=newest)} == {"t#1", "u#1"}  # t#1 at exactly `newest`, u#1 after
    assert [p.key for p in a.load(limit=1)] == ["u#1"]  # the most recently updated first within the limit


def test_vectors_are_stored_as_float32_bytes(db_url: str) -> None:
    store(db_url).merge({"t#1": Delta(unit(3, 4, 0), 1)})
    engine = make_engine(db_url)
    with engine.connect() as conn:
        row = conn.execute(select(ToolProfile)).one()
    engine.dispose()
    assert row.dim == 3 and len(row.mean) == 12 and row.version == 1
    np.testing.assert_allclose(np.frombuffer(row.mean, dtype="<f4"), [0.6, 0.8, 0.0], atol=1e-7)


SETTINGS = parse_settings({"policy": {"tools": {"scorer": "embedding", "usage_sync_s": 3600}}})


def test_runtimes_share_profiles_through_the_store_and_a_restart_keeps_them(db_url: str) -> None:
    """Two workers' runtimes: what one learns, the other reads at its next sync, and a new one at start."""

    async def scenario() -> None:
        first, second = ToolUsageRuntime(SETTINGS, store(db_url)), ToolUsageRuntime(SETTINGS, store(db_url))
        await first.start()
        await second.start()
        first.profiles.observe(["t#1"], unit(1, 0))
        second.profiles.observe(["t#1"], unit(0, 1))
        assert await first.sync() and await second.sync() and await first.sync()
        for rt in (first, second):
            assert rt.profiles.examples("t#1") == 2
            np.testing.assert_allclose(rt.snapshot()["t#1"], unit(1, 1), atol=1e-6)
        first.profiles.observe(["u#1"], unit(1, 0))  # not synced yet: stop() merges it
        await first.stop()
        await second.stop()
        restarted = ToolUsageRuntime(SETTINGS, store(db_url))
        await restarted.start()
        assert restarted.profiles.examples("t#1") == 2 and restarted.profiles.examples("u#1") == 1
        await restarted.stop()

    asyncio.run(scenario())


class FailingOnce(ToolProfileStore):
    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self.failures = 1

    def merge(self, *args: Any, **kwargs: Any) -> Any:
        if self.failures:
            self.failures -= 1
            raise ConnectionError("database went away")
        return super().merge(*args, **kwargs)


def test_a_failed_sync_keeps_its_observations_for_the_next(db_url: str, caplog: pytest.LogCaptureFixture) -> None:
    async def scenario() -> None:
        flaky = FailingOnce(db_url, "enc-a")
        rt = ToolUsageRuntime(SETTINGS, flaky)
        rt.profiles.observe(["t#1"], unit(1, 0))
        assert not await rt.sync()
        assert rt.profiles.examples("t#1") == 1  # still served from memory meanwhile
        assert await rt.sync()
        assert [(p.key, p.examples) for p in store(db_url).load()] == [("t#1", 1)]

    asyncio.run(scenario())
    assert "syncing tool usage profiles with the store failed" in caplog.text


def test_forget_deletes_every_definition_of_one_tool_name_only(db_url: str) -> None:
    s = store(db_url)
    s.merge({f"get_user#{'a' * 16}": Delta(unit(1, 0), 1), f"get_user#{'b' * 16}": Delta(unit(1, 0), 2)})
    s.merge({f"getXuser#{'a' * 16}": Delta(unit(1, 0), 1), f"get_users#{'a' * 16}": Delta(unit(1, 0), 1)})
    assert forget_profiles(s.engine, "get_user") == 2  # "_" is not a wildcard, "get_users" is another tool
    assert sorted(r["tool"] for r in list_profiles(s.engine)) == ["getXuser", "get_users"]
    s.close()
