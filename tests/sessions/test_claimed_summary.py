"""Each distinct summariser call is made once across processes; the others reuse its text."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import pytest
from prometheus_client import REGISTRY

from gateway.assembly.context import Message
from gateway.sessions.claimed_summary import ClaimedSummarizer, SummaryUnavailable, summary_key
from gateway.sessions.memory import MemorySessionStore
from gateway.sessions.shared import SharedSessionStore

SPAN: tuple[Message, ...] = ({"role": "user", "content": "book 2 seats on flight IB3170"},)


class CountingSummarizer:
    """A slow summariser that counts its calls, so a second call would be seen."""

    name = "llm:test"

    def __init__(self, *, fail: bool = False, delay_s: float = 0.2) -> None:
        self.calls = 0
        self.fail = fail
        self.delay_s = delay_s
        self._lock = threading.Lock()

    def __call__(self, messages: tuple[Message, ...], previous: str | None, max_tokens: int) -> str:
        with self._lock:
            self.calls += 1
        time.sleep(self.delay_s)
        if self.fail:
            raise RuntimeError("provider said 503")
        return f"{self.calls} call(s): flight IB3170, 2 seats, previous={previous}"


def _claims(outcome: str) -> float:
    return REGISTRY.get_sample_value("ventana_summary_claims_total", {"outcome": outcome}) or 0.0


@pytest.fixture
def stores(database_url: str) -> Iterator[list[SharedSessionStore]]:
    found = [SharedSessionStore(database_url, owner=f"replica-{i}") for i in range(3)]
    yield found
    for store in found:
        store._engine.dispose()


def _race(wrappers: list[ClaimedSummarizer], previous: str | None = None) -> list[str | BaseException]:
    out: list[str | BaseException] = []
    barrier = threading.Barrier(len(wrappers))

    def run(w: ClaimedSummarizer) -> None:
        barrier.wait()
        try:
            out.append(w(SPAN, previous, 300))
        except Exception as exc:
            out.append(exc)

    threads = [threading.Thread(target=run, args=(w,)) for w in wrappers]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return out


def test_concurrent_replicas_make_one_call_and_return_the_same_text(stores: list[SharedSessionStore]) -> None:
    inner = CountingSummarizer()
    before = {o: _claims(o) for o in ("called", "reused")}
    results = _race([ClaimedSummarizer(inner, s, wait_s=10) for s in stores for _ in range(2)])
    assert inner.calls == 1
    assert {o: _claims(o) - before[o] for o in before} == {"called": 1, "reused": 5}
    assert results == ["1 call(s): flight IB3170, 2 seats, previous=None"] * 6
    assert _race([ClaimedSummarizer(inner, stores[0], wait_s=10)], previous="earlier") == [
        "2 call(s): flight IB3170, 2 seats, previous=earlier"
    ], "a different input is a different call"


def test_a_failed_summary_fails_for_every_replica_without_a_second_call(stores: list[SharedSessionStore]) -> None:
    inner = CountingSummarizer(fail=True)
    results = _race([ClaimedSummarizer(inner, s, wait_s=10) for s in stores])
    assert inner.calls == 1
    assert sorted(type(r).__name__ for r in results) == ["RuntimeError", "SummaryUnavailable", "SummaryUnavailable"]


def test_a_vanished_winner_is_waited_for_once_then_marked_failed(stores: list[SharedSessionStore]) -> None:
    inner = CountingSummarizer(delay_s=0)
    assert stores[0].claim(summary_key(inner.name, SPAN, None, 300))  # a replica that then crashed
    started = time.monotonic()
    with pytest.raises(SummaryUnavailable, match="did not finish"):
        ClaimedSummarizer(inner, stores[1], wait_s=0.3)(SPAN, None, 300)
    assert time.monotonic() - started >= 0.3
    started = time.monotonic()
    with pytest.raises(SummaryUnavailable):
        ClaimedSummarizer(inner, stores[2], wait_s=30)(SPAN, None, 300)
    assert time.monotonic() - started < 5, "the failure is stored: nobody waits again"
    assert inner.calls == 0


def test_one_process_dedupes_through_the_memory_store() -> None:
    inner = CountingSummarizer(delay_s=0.1)
    store = MemorySessionStore()
    results = _race([ClaimedSummarizer(inner, store, wait_s=5) for _ in range(3)])
    assert inner.calls == 1 and len(set(map(str, results))) == 1


def test_a_summary_is_shared_by_one_sessions_replicas_and_never_by_another_session(
    stores: list[SharedSessionStore],
) -> None:
    """Two sessions (or two callers) summarising the same messages each make their own call: a continued
    summary is made on a session's own prefix, and the claim is there for one conversation's replicas."""
    inner = CountingSummarizer(delay_s=0)
    base = [ClaimedSummarizer(inner, s, wait_s=10) for s in stores]
    ana = [w.for_session("key-ana/run-16000") for w in base]
    assert len({r for r in _race(ana) if isinstance(r, str)}) == 1 and inner.calls == 1
    assert ana[0].for_session("key-ana/run-16000") is ana[0]
    assert base[0].for_session("key-ana/run-8000")(SPAN, None, 300).startswith("2 call(s)")
    assert base[1].for_session("key-bob/run-16000")(SPAN, None, 300).startswith("3 call(s)")
    assert inner.calls == 3
