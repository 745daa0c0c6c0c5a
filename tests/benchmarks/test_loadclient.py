"""The benchmarks' client interleaves its targets in a new order every request, over real HTTP; the store
writer benchmark runs end to end."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from pathlib import Path

import httpx
import orjson

from benchmarks.loadclient import Target, interleaved, shuffled
from tests.procs import REPO_ROOT, run_simulator

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


def test_store_writer_benchmark_times_every_request_in_a_fresh_process() -> None:
    """benchmarks.store_writer writes a short growing session and reports a time per history bucket."""
    done = subprocess.run(
        [sys.executable, "-m", "benchmarks.store_writer", "--requests", "12", "--end-tokens", "30000", "--repeat", "1"],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        check=True,
        timeout=300,
    )
    rows = [line for line in done.stdout.splitlines() if line.startswith("| ") and "K |" in line]
    assert rows and sum(int(row.split(" | ")[-1].rstrip(" |")) for row in rows) == 12
    assert all(float(row.split(" | ")[1]) > 0 for row in rows)


def test_growing_session_pairs_each_fixed_point_with_the_growing_requests_around_it() -> None:
    """The paired gap compares a fixed point's repeats with its neighbours, not with other minutes."""
    from benchmarks.growing_session import BUCKET_TOKENS, PAIR_SPAN, summarise

    rows: list[dict[str, object]] = []
    for run, drift in ((0, 0.0), (1, 10.0)):  # the second run on a machine 10 ms slower everywhere
        for i in range(30):
            tokens = BUCKET_TOKENS * 4 + i
            row = {"run": run, "i": i, "tokens": tokens, "direct": 1.0}
            rows.append({**row, "shape": "growing", "gw": 4.0 + drift})
            if i % 10 == 0:
                rows += [{**row, "shape": "fixed", "gw": 3.5 + drift}] * 5
    [fixed, growing] = summarise(rows, ["gw"])
    assert growing["gw growing - fixed, paired p50 ms"] == 0.5
    assert growing["pairs"] == 6 and PAIR_SPAN < 10
    assert fixed["shape"] == "fixed" and "pairs" not in fixed


def test_a_connection_the_server_closed_while_idle_is_opened_again() -> None:
    """uvicorn closes a keep-alive connection idle for 5 s; the next request goes on a new one, once."""
    from benchmarks.loadclient import Connection

    async def scenario() -> tuple[list[int], int]:
        accepted: list[int] = []
        answer = b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok"

        async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            accepted.append(1)
            await reader.readuntil(b"\r\n\r\n")
            writer.write(answer)
            await writer.drain()
            writer.close()  # then closes it as an idle keep-alive connection, without a "connection: close"

        server = await asyncio.start_server(serve, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        conn = Connection(Target("t", f"http://127.0.0.1:{port}/v1"))
        payload = b"GET /v1/chat/completions HTTP/1.1\r\nhost: x\r\n\r\n"
        statuses = []
        for _ in range(3):
            statuses.append((await conn.send(payload)).status)
            await asyncio.sleep(0.05)  # the close reaches the client while it waits
        await conn.close()
        server.close()
        return statuses, len(accepted)

    statuses, connections = asyncio.run(scenario())
    assert statuses == [200, 200, 200]
    assert connections == 3
