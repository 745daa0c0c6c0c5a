"""Load test with provider faults injected: nothing lost, every failure clear.

Starts the provider simulator (with its connection-cutting front) and one gateway worker
(``ventana serve``, recording through the production ``SqlRecorder`` into a fresh SQLite
file or a PostgreSQL database of its own), then sends requests on
loopback at a steady open-loop rate (each request leaves at its scheduled time whether or
not earlier ones were answered), a share of them streamed, while a share of the schedule
slots also queue a provider fault (429 with and without retry-after, 500, 503, a hang past
the upstream timeout, a connection closed before answering, a stream dropped half way, a
malformed body or chunk). Bounded by ``--requests`` and ``--duration``.

Each request ends in exactly one of:

- answered: 200 with the simulator's answer (streamed: every chunk, then ``[DONE]``);
- clear error: an error status, or an error event in a stream, in the OpenAI error shape;
- unclear: anything else (a dropped connection to the gateway, a body that is not the shape).

With ``--db-outage-at T --db-outage-s D`` (PostgreSQL only) the gateway reaches its
database through a TCP proxy that is cut T seconds into the run and restored D seconds
later: the recorder spools meanwhile and replays the spool when the database is back.

Then the rows in the store are counted by request id: ``recorded`` must equal ``sent``.

    python -m benchmarks.load_faults --rate 20 --duration 30 --store postgres --db-outage-at 10 --db-outage-s 8
"""

from __future__ import annotations

import asyncio
import random
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import click
import httpx
import orjson
from tqdm import tqdm

from benchmarks.load_store import (
    Outage,
    StoreKind,
    StoreUnderTest,
    count_recorded,
    start_gateway,
    store_status,
    store_under_test,
)

FAULTS: tuple[dict[str, Any], ...] = (
    {"kind": "status", "status": 429, "retry_after": "0.1"},
    {"kind": "status", "status": 429},
    {"kind": "status", "status": 500},
    {"kind": "status", "status": 503},
    {"kind": "hang", "seconds": 1.5},
    {"kind": "close"},
    {"kind": "drop_stream"},
    {"kind": "malformed"},
)


@dataclass(frozen=True, slots=True)
class Outcome:
    request_id: str | None
    status: int  # HTTP status; a stream that ended in an error event counts as that error's class (502)
    result: str  # "answered" | "clear_error" | "unclear"
    stream: bool


def _shaped(payload: Any) -> bool:
    error = payload.get("error") if isinstance(payload, dict) else None
    return isinstance(error, dict) and set(error) == {"message", "type", "param", "code"} and bool(error["message"])


async def _plain(client: httpx.AsyncClient, body: dict[str, Any]) -> Outcome:
    r = await client.post("/chat/completions", json=body)
    request_id = r.headers.get("x-ventana-request-id")
    try:
        payload = r.json()
    except ValueError:
        return Outcome(request_id, r.status_code, "unclear", False)
    if r.status_code == 200:
        text = payload["choices"][0]["message"]["content"] or ""
        return Outcome(request_id, 200, "answered" if text.startswith("Simulated answer") else "unclear", False)
    return Outcome(request_id, r.status_code, "clear_error" if _shaped(payload) else "unclear", False)


async def _streamed(client: httpx.AsyncClient, body: dict[str, Any]) -> Outcome:
    async with client.stream("POST", "/chat/completions", json=body) as r:
        request_id = r.headers.get("x-ventana-request-id")
        if r.status_code != 200:
            payload = orjson.loads(await r.aread())
            return Outcome(request_id, r.status_code, "clear_error" if _shaped(payload) else "unclear", True)
        text: list[str] = []
        async for line in r.aiter_lines():
            if line == "data: [DONE]":
                ok = "".join(text).startswith("Simulated answer")
                return Outcome(request_id, 200, "answered" if ok else "unclear", True)
            if line.startswith("data: "):
                event = orjson.loads(line[6:])
                if "error" in event:
                    return Outcome(request_id, 502, "clear_error" if _shaped(event) else "unclear", True)
                text.extend((c.get("delta") or {}).get("content") or "" for c in event.get("choices") or ())
        return Outcome(request_id, 200, "unclear", True)


async def one_request(client: httpx.AsyncClient, i: int, stream: bool) -> Outcome:
    body = {
        "model": "gpt-4o-mini",
        "messages": [{"role": "user", "content": f"load request {i}: answer me in a handful of words"}],
        "stream": stream,
    }
    try:
        return await (_streamed(client, body) if stream else _plain(client, body))
    except (httpx.HTTPError, ValueError, KeyError, IndexError):
        return Outcome(None, 0, "unclear", stream)


async def run_load(
    gateway_url: str,
    sim_url: str,
    *,
    rate: float,
    requests: int,
    fault_share: float,
    stream_share: float,
    seed: int,
    outage: Outage | None = None,
) -> tuple[list[Outcome], Counter[str], float]:
    """Send ``requests`` at ``rate``/s, queueing a fault in ``fault_share`` of the slots (and cut the DB)."""
    rng = random.Random(seed)
    faults: Counter[str] = Counter()
    limits = httpx.Limits(max_connections=500, max_keepalive_connections=100)
    async with (
        httpx.AsyncClient(base_url=gateway_url, timeout=30, limits=limits) as client,
        httpx.AsyncClient(base_url=sim_url, timeout=5) as sim,
    ):
        tasks: list[asyncio.Task[Outcome]] = []
        bar = tqdm(total=requests, desc="answered", unit="req")
        start = time.perf_counter()
        drill = asyncio.create_task(outage.run(start)) if outage is not None else None
        for i in range(requests):
            delay = start + i / rate - time.perf_counter()
            if delay > 0:
                await asyncio.sleep(delay)
            if rng.random() < fault_share:
                fault = rng.choice(FAULTS)
                (await sim.post("/_sim/faults", json={"faults": [fault]})).raise_for_status()
                faults[fault["kind"] + str(fault.get("status", "")) + ("+ra" if "retry_after" in fault else "")] += 1
            task = asyncio.create_task(one_request(client, i, rng.random() < stream_share))
            task.add_done_callback(lambda _: bar.update())
            tasks.append(task)
        outcomes = list(await asyncio.gather(*tasks))
        elapsed = time.perf_counter() - start
        if drill is not None:
            await drill
        bar.close()
    return outcomes, faults, elapsed


@dataclass(frozen=True, slots=True)
class StoreTally:
    """What reached the store, counted in the database itself, and the recorder's own account."""

    kind: str
    recorded: int
    mismatched: int  # rows whose status disagrees with what the client saw
    unknown: int  # rows for requests nobody sent
    status: dict[str, Any]  # the recorder's written / spooled / dropped counters
    outage: Outage | None


def _run(
    tmp: Path, store: StoreUnderTest, outage: Outage | None, sim_latency_ms: float, **load: Any
) -> tuple[list[Outcome], Counter[str], float, StoreTally, bool]:
    """Start the simulator and the gateway on ``store``, run the load, count what reached the store."""
    from tests.procs import run_simulator

    with run_simulator(tmp, record=False, latency_ms=sim_latency_ms, cut=True) as sim:
        assert sim.cut_base_url is not None
        proc, gateway_url = start_gateway(tmp, sim.cut_base_url, store)
        try:
            outcomes, faults, elapsed = asyncio.run(run_load(gateway_url, sim.url, outage=outage, **load))
            failed = {o.request_id: o.result != "answered" for o in outcomes if o.request_id}
            recorded, mismatched, unknown = count_recorded(store.real_url, failed)
            alive = proc.poll() is None and httpx.get(gateway_url[:-3] + "/healthz").status_code == 200
            tally = StoreTally(store.kind, recorded, mismatched, unknown, store_status(gateway_url), outage)
        finally:
            proc.terminate()
            proc.wait(15)
    return outcomes, faults, elapsed, tally, alive


@click.command()
@click.option("--rate", default=20.0, show_default=True, help="Requests per second (open loop).")
@click.option("--duration", default=30.0, show_default=True, help="Seconds of load; requests = rate x duration.")
@click.option("--requests", "max_requests", default=2000, show_default=True, help="Upper bound on requests sent.")
@click.option("--fault-share", default=0.25, show_default=True, help="Share of slots that also queue a fault.")
@click.option("--stream-share", default=0.5, show_default=True, help="Share of requests that stream.")
@click.option("--sim-latency-ms", default=20.0, show_default=True, help="Simulated provider latency.")
@click.option("--seed", default=7, show_default=True)
@click.option(
    "--store",
    "store_kind",
    type=click.Choice(["sqlite", "postgres"]),
    default="sqlite",
    show_default=True,
    help="The SQL store the gateway records into (a fresh SQLite file, or a PostgreSQL database made for the run).",
)
@click.option("--db-outage-at", type=float, default=None, help="Cut the database this many seconds in (postgres).")
@click.option("--db-outage-s", type=float, default=5.0, show_default=True, help="How long the database stays away.")
def main(
    rate: float,
    duration: float,
    max_requests: int,
    fault_share: float,
    stream_share: float,
    sim_latency_ms: float,
    seed: int,
    store_kind: StoreKind,
    db_outage_at: float | None,
    db_outage_s: float,
) -> None:
    """Hold a steady rate against a gateway while the provider misbehaves; report sent/answered/failed/recorded."""
    requests = max(1, min(max_requests, int(rate * duration)))
    load = {"rate": rate, "requests": requests, "fault_share": fault_share, "stream_share": stream_share, "seed": seed}
    with tempfile.TemporaryDirectory(prefix="ventana-load-") as tmp_name:
        tmp = Path(tmp_name)
        try:
            store_cm = store_under_test(store_kind, tmp, outage=db_outage_at is not None)
            with store_cm as store:
                outage = None
                if store.outage is not None and db_outage_at is not None:
                    outage = Outage(store.outage, db_outage_at, db_outage_s)
                outcomes, faults, elapsed, tally, alive = _run(tmp, store, outage, sim_latency_ms, **load)
        except (ValueError, RuntimeError) as exc:
            raise click.UsageError(str(exc)) from exc
    _report(outcomes, faults, elapsed, tally, alive)
    unclear = any(o.result == "unclear" for o in outcomes)
    if tally.recorded != len(outcomes) or unclear or tally.mismatched or tally.unknown or not alive:
        sys.exit(1)


def _report(outcomes: list[Outcome], faults: Counter[str], elapsed: float, tally: StoreTally, alive: bool) -> None:
    results = Counter(o.result for o in outcomes)
    statuses = Counter(o.status for o in outcomes)
    print(f"sent                 {len(outcomes)} in {elapsed:.1f}s ({len(outcomes) / elapsed:.1f} req/s achieved)")
    print(f"streamed             {sum(o.stream for o in outcomes)}")
    print(f"faults queued        {sum(faults.values())}  {dict(sorted(faults.items()))}")
    print(f"answered correctly   {results['answered']}")
    print(f"failed, clear error  {results['clear_error']}  statuses {dict(sorted(statuses.items()))}")
    print(f"unclear              {results['unclear']}")
    if tally.outage is not None:
        o = tally.outage
        print(f"database outage      cut at {o.cut_at or 0:.1f}s, restored at {o.restored_at or 0:.1f}s")
    status = {k: tally.status[k] for k in ("written", "spooled", "dropped", "spool_pending")}
    print(f"recorder             {tally.kind}: {status}")
    print(
        f"recorded             {tally.recorded}  (rows in the {tally.kind} store; status disagreeing with the "
        f"client: {tally.mismatched}; rows nobody sent: {tally.unknown})"
    )
    print(f"gateway alive        {alive}")


if __name__ == "__main__":
    main()
