"""Load test with provider faults injected: nothing lost, every failure clear.

Starts the provider simulator (with its connection-cutting front) and one gateway worker
whose Recorder appends JSONL (``benchmarks.serve_recorded``), then sends requests on
loopback at a steady open-loop rate (each request leaves at its scheduled time whether or
not earlier ones were answered), a share of them streamed, while a share of the schedule
slots also queue a provider fault (429 with and without retry-after, 500, 503, a hang past
the upstream timeout, a connection closed before answering, a stream dropped half way, a
malformed body or chunk). Bounded by ``--requests`` and ``--duration``.

Each request ends in exactly one of:

- answered: 200 with the simulator's answer (streamed: every chunk, then ``[DONE]``);
- clear error: an error status, or an error event in a stream, in the OpenAI error shape;
- unclear: anything else (a dropped connection to the gateway, a body that is not the shape).

Then the records are counted by request id: ``recorded`` must equal ``sent``.

    python -m benchmarks.load_faults --rate 20 --duration 30
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

from gateway.store.jsonl_recorder import read_records

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
GATEWAY_UPSTREAM = {"timeout_s": 1.0, "max_retries": 2, "retry_backoff_s": 0.05}


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
    gateway_url: str, sim_url: str, *, rate: float, requests: int, fault_share: float, stream_share: float, seed: int
) -> tuple[list[Outcome], Counter[str], float]:
    """Send ``requests`` at ``rate``/s, queueing a fault in ``fault_share`` of the slots."""
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
        bar.close()
    return outcomes, faults, elapsed


def count_recorded(records_path: Path, outcomes: list[Outcome], wait_s: float = 15.0) -> tuple[int, int]:
    """How many sent requests the recorder holds, and how many of those disagree with the client's status."""
    ids = {o.request_id for o in outcomes if o.request_id}
    deadline = time.monotonic() + wait_s
    while True:
        records = {r["request_id"]: r for r in read_records(records_path)}
        if ids <= set(records) or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    recorded = sum(1 for o in outcomes if o.request_id in records)
    mismatched = sum(
        1
        for o in outcomes
        if o.request_id in records and (records[o.request_id]["status"] >= 400) != (o.result == "clear_error")
    )
    return recorded, mismatched


def _start_gateway(tmp: Path, sim_cut_url: str, records: Path) -> tuple[Any, str]:
    import subprocess

    import yaml

    from tests.procs import _env, free_port, sim_models, wait_http

    port = free_port()
    config = tmp / "gateway.yaml"
    config.write_text(yaml.safe_dump({"models": sim_models(sim_cut_url), "upstream": GATEWAY_UPSTREAM}))
    cmd = [sys.executable, "-m", "benchmarks.serve_recorded", "--config", str(config), "--port", str(port)]
    log = (tmp / "gateway.log").open("wb")
    proc = subprocess.Popen([*cmd, "--records", str(records)], env=_env(), stdout=log, stderr=subprocess.STDOUT)
    wait_http(f"http://127.0.0.1:{port}/healthz", proc=proc)
    return proc, f"http://127.0.0.1:{port}/v1"


@click.command()
@click.option("--rate", default=20.0, show_default=True, help="Requests per second (open loop).")
@click.option("--duration", default=30.0, show_default=True, help="Seconds of load; requests = rate x duration.")
@click.option("--requests", "max_requests", default=2000, show_default=True, help="Upper bound on requests sent.")
@click.option("--fault-share", default=0.25, show_default=True, help="Share of slots that also queue a fault.")
@click.option("--stream-share", default=0.5, show_default=True, help="Share of requests that stream.")
@click.option("--sim-latency-ms", default=20.0, show_default=True, help="Simulated provider latency.")
@click.option("--seed", default=7, show_default=True)
def main(
    rate: float,
    duration: float,
    max_requests: int,
    fault_share: float,
    stream_share: float,
    sim_latency_ms: float,
    seed: int,
) -> None:
    """Hold a steady rate against a gateway while the provider misbehaves; report sent/answered/failed/recorded."""
    from tests.procs import run_simulator

    requests = max(1, min(max_requests, int(rate * duration)))
    with tempfile.TemporaryDirectory(prefix="ventana-load-") as tmp_name:
        tmp = Path(tmp_name)
        records = tmp / "records.jsonl"
        with run_simulator(tmp, record=False, latency_ms=sim_latency_ms, cut=True) as sim:
            assert sim.cut_base_url is not None
            proc, gateway_url = _start_gateway(tmp, sim.cut_base_url, records)
            try:
                outcomes, faults, elapsed = asyncio.run(
                    run_load(
                        gateway_url,
                        sim.url,
                        rate=rate,
                        requests=requests,
                        fault_share=fault_share,
                        stream_share=stream_share,
                        seed=seed,
                    )
                )
                recorded, mismatched = count_recorded(records, outcomes)
                alive = proc.poll() is None and httpx.get(gateway_url[:-3] + "/healthz").status_code == 200
            finally:
                proc.terminate()
                proc.wait(15)
    _report(outcomes, faults, elapsed, recorded, mismatched, alive)
    if recorded != len(outcomes) or any(o.result == "unclear" for o in outcomes) or mismatched or not alive:
        sys.exit(1)


def _report(
    outcomes: list[Outcome], faults: Counter[str], elapsed: float, recorded: int, mismatched: int, alive: bool
) -> None:
    results = Counter(o.result for o in outcomes)
    statuses = Counter(o.status for o in outcomes)
    print(f"sent                 {len(outcomes)} in {elapsed:.1f}s ({len(outcomes) / elapsed:.1f} req/s achieved)")
    print(f"streamed             {sum(o.stream for o in outcomes)}")
    print(f"faults queued        {sum(faults.values())}  {dict(sorted(faults.items()))}")
    print(f"answered correctly   {results['answered']}")
    print(f"failed, clear error  {results['clear_error']}  statuses {dict(sorted(statuses.items()))}")
    print(f"unclear              {results['unclear']}")
    print(f"recorded             {recorded}  (status disagreeing with the client: {mismatched})")
    print(f"gateway alive        {alive}")


if __name__ == "__main__":
    main()
