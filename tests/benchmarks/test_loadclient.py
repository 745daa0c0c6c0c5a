"""The benchmarks' client interleaves its targets in a new order every request, over real HTTP."""

from __future__ import annotations

import asyncio
from pathlib import Path

import httpx
import orjson

from benchmarks.loadclient import Target, interleaved, shuffled
from tests.procs import run_simulator

BODY = orjson.dumps({"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 8})


def test_no_target_keeps_the_slot_after_direct() -> None:
    targets = {name: Target(name, "http://127.0.0.1:9/v1") for name in ("direct", "new", "old", "variant")}
    orders = [[name for name, _ in shuffled(targets, k)] for k in range(200)]
    assert orders == [[name for name, _ in shuffled(targets, k)] for k in range(200)], "seeded: runs compare"
    after_direct = {o[o.index("direct") + 1] for o in orders if o[-1] != "direct"}
    assert after_direct == {"new", "old", "variant"}
    assert {o[0] for o in orders} == set(targets)


def test_interleaved_sends_every_target_its_requests(tmp_path: Path) -> None:
    with run_simulator(tmp_path, record=False, cache=False) as sim:
        stats_url = sim.base_url.removesuffix("/v1") + "/sim/stats"
        before = httpx.get(stats_url).json()["requests"]  # the start-up probe may count
        targets = {name: Target(name, sim.base_url) for name in ("direct", "a", "b")}
        timings = asyncio.run(interleaved(targets, BODY, 7, seed=3))
        after = httpx.get(stats_url).json()["requests"]
    assert {name: [t.status for t in ts] for name, ts in timings.items()} == {n: [200] * 7 for n in targets}
    assert all(t.end > 0 for ts in timings.values() for t in ts)
    assert after - before == 21
