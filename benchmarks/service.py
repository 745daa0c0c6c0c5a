"""The gateway as a service: start-up time, memory after many requests, event-loop lag, workers.

    python -m benchmarks.service [--requests 10000] [--quick]

- start-up: ``ventana serve`` until ``/healthz`` answers, median of 5 starts, and whether
  serving imported litellm (it must stay lazily imported);
- memory: resident set size of the gateway before and after ``--requests`` requests
  (tiny, agent14k and streamed, 1,000 different conversations) at 16 clients;
- loop lag: a gateway with ``diagnostics.loop_lag_probe_ms: 1`` takes first turns of
  ~105K-token conversations (every text new, so everything must be encoded) while 4
  clients send tiny requests; reports probe samples over 5 ms and the largest lag bucket;
- workers: tiny at 32 clients against ``--workers 1`` and ``--workers 2`` (both keeping
  session state in the database, as several workers must) and the default single worker
  (session state in memory), interleaved; then
  the same with requests whose cost is the gateway's own CPU (the 199 MetaTool questions
  with all 199 tools, pruned per request), where workers are meant to scale throughput;
- long conversations (``--long N``, off by default): resident set size while N different
  ~105K-token conversations (every text new) each send two turns, one client at a time:
  what the gateway's caches hold when every conversation is long.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import httpx
import orjson
from tqdm import tqdm

import gateway  # noqa: F401  (offline tiktoken)
from benchmarks.loadclient import Connection, Target, saturate
from benchmarks.profiles import MODEL, build_profiles, fresh
from benchmarks.tool_cases import selection_cases
from tests.procs import REPO_ROOT, _env, free_port, run_gateway, run_simulator, wait_http


def _models(base_url: str) -> list[dict[str, Any]]:
    return [{"name": MODEL, "litellm_model": f"openai/{MODEL}", "api_base": base_url}]


def _cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def startup(tmp: Path, base_url: str, runs: int = 5) -> tuple[float, float, bool]:
    """Median wall and CPU seconds from spawning ``ventana serve`` to /healthz; whether litellm got imported.

    CPU time is what start-up costs on an idle machine; wall time on a shared one also
    counts the time other processes had the cores."""
    import yaml

    config = tmp / "startup.yaml"
    config.write_text(yaml.safe_dump({"models": _models(base_url)}))
    walls, cpus = [], []
    for _ in range(runs):
        port = free_port()
        cmd = [sys.executable, "-m", "gateway.cli", "serve", "--config", str(config), "--port", str(port)]
        started = time.perf_counter()
        proc = subprocess.Popen(cmd, env=_env(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=tmp)
        try:
            wait_http(f"http://127.0.0.1:{port}/healthz", proc=proc)
            walls.append(time.perf_counter() - started)
            cpus.append(_cpu_seconds(proc.pid))
        finally:
            proc.terminate()
            proc.wait(10)
    probe = (
        "import sys, gateway.serve, gateway.api.app, gateway.cli; "
        "from gateway.config import load_settings; gateway.api.app.create_app(load_settings()); "
        "print('litellm' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", probe], env=_env(), capture_output=True, text=True, cwd=REPO_ROOT)
    return statistics.median(walls), statistics.median(cpus), out.stdout.strip() == "True"


def rss_mb(pid: int) -> float:
    """Resident set size of a process and its children (workers), in MB."""
    total = 0
    pids = [pid] + [int(p) for p in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    for p in pids:
        status = Path(f"/proc/{p}/status").read_text()
        total += int(re.search(r"VmRSS:\s+(\d+)", status).group(1))  # type: ignore[union-attr]
    return total / 1024


async def _many(target: Target, bodies: list[bytes], total: int, clients: int, bar: tqdm[Any]) -> int:
    sent = errors = 0
    payloads = [target.request_bytes(b) for b in bodies]

    async def worker() -> None:
        nonlocal sent, errors
        conn = Connection(target)
        while sent < total:
            payload = payloads[sent % len(payloads)]
            sent += 1
            errors += (await conn.send(payload)).status != 200
            bar.update(1)
        await conn.close()

    await asyncio.gather(*(worker() for _ in range(clients)))
    return errors


def memory(tmp: Path, base_url: str, requests: int) -> tuple[float, float, int]:
    """RSS (MB) of a gateway before and after ``requests`` mixed requests, and the failures."""
    tiny, agent, stream = build_profiles(("tiny", "agent14k", "stream"))
    bodies = []
    for i in range(1_000):  # 1,000 conversations: the session store and caches fill as in service
        body = orjson.loads((tiny, stream)[i % 2].body)
        body["messages"][0]["content"] = f"Conversation {i}: say hello in five words."
        bodies.append(orjson.dumps(body))
        if i % 10 == 0:
            bodies.append(agent.body)
    with run_gateway(tmp, {"models": _models(base_url)}) as gw:
        target = Target("ventana", gw.base_url)
        before = rss_mb(gw.proc.pid)
        with tqdm(total=requests, desc="memory", unit="req") as bar:
            errors = asyncio.run(_many(target, bodies, requests, 16, bar))
        return before, rss_mb(gw.proc.pid), errors


def _histogram(text: str, name: str) -> tuple[int, int, float]:
    """(observations, observations over 5 ms, smallest bucket bound holding all) of a histogram."""
    buckets = {float(le): float(v) for le, v in re.findall(rf'{name}_bucket\{{le="([^"]+)"\}} (\S+)', text)}
    total = int(buckets[float("inf")])
    return total, total - int(buckets[5.0]), min(le for le, v in buckets.items() if v == total)


def loop_lag(
    tmp: Path, base_url: str, firsts: int, *, timed: bool = False
) -> tuple[dict[str, tuple[int, int, float]], list[str]]:
    """Loop lag and loop-thread CPU between probe wake-ups while first turns of ~105K tokens arrive.

    ``timed``: also the CPU of every loop callback (on asyncio's own loop, which the timer
    needs) and the gateway's log lines naming each callback that held the loop over 5 ms.
    """
    tiny, agent = build_profiles(("tiny", "agent105k"))
    diagnostics: dict[str, Any] = {"loop_lag_probe_ms": 1, "time_callbacks": timed}
    config = {"models": _models(base_url), "diagnostics": diagnostics}
    with run_gateway(tmp, config) as gw:
        target = Target("ventana", gw.base_url)

        async def run() -> None:
            stop = False

            async def small() -> None:
                conn = Connection(target)
                payload = target.request_bytes(tiny.body)
                while not stop:
                    await conn.send(payload)
                await conn.close()

            tasks = [asyncio.create_task(small()) for _ in range(4)]
            conn = Connection(target)
            for k in tqdm(range(firsts), desc="first turns", unit="req"):
                await conn.send(target.request_bytes(fresh(agent.body, k)))
            stop = True
            await asyncio.gather(*tasks)
            await conn.close()

        asyncio.run(run())
        text = httpx.get(gw.url + "/metrics").text
        blocks = [line for line in gw.log().splitlines() if "event loop was blocked" in line]
    names = ("lag", "busy", "callback") if timed else ("lag", "busy")
    return {name: _histogram(text, f"ventana_event_loop_{name}_ms") for name in names}, blocks


def workers(tmp: Path, base_url: str, rounds: int, seconds: float, *, cpu_bound: bool = False) -> dict[Any, float]:
    """Median throughput at 32 clients for 1 and 2 workers, measured in interleaved rounds.

    By default tiny requests: on 2 cores the load generator and the simulator need a core
    too, so this shows what a shared small machine gives. ``cpu_bound``: the 199 MetaTool
    questions, each offering all 199 tools, pruned by the default bm25 scorer: ~12 ms of the
    gateway's own Python a request against well under 1 ms for client and simulator, so the
    gateway's cores are what limits throughput, which is what ``--workers`` is for. The 1-
    and 2-worker gateways both keep session state in the database, as several workers must,
    so the ratio compares like with like; a single worker defaults to memory, and
    ``"memory"`` is that default measured in the same rounds.
    """
    config: dict[str, Any] = {"models": _models(base_url)}
    body, bodies = build_profiles(("tiny",))[0].body, []
    if cpu_bound:
        cases = [c for c in selection_cases("metatool.jsonl") if len(c.tools) >= 150]
        bodies = [orjson.dumps({"model": MODEL, "messages": c.messages, "tools": c.tools}) for c in cases]
        body = bodies[0]
    gateways: dict[Any, tuple[dict[str, Any], int]] = {
        1: ({**config, "session_state": "database"}, 1),
        2: (config, 2),
        "memory": (config, 1),
    }
    with ExitStack() as stack:
        targets = {
            key: Target(str(key), stack.enter_context(run_gateway(tmp, cfg, workers=n)).base_url)
            for key, (cfg, n) in gateways.items()
        }
        time.sleep(2)  # let both workers of the second gateway accept
        for target in targets.values():  # every worker's memos warm (tool documents, token counts)
            asyncio.run(saturate(target, body, 8, 2.0 if bodies else 0.2, bodies))
        rates: dict[Any, list[float]] = {key: [] for key in targets}
        for _ in tqdm(range(rounds), desc="workers", unit="round"):
            for key, target in targets.items():
                rates[key].append(asyncio.run(saturate(target, body, 32, seconds, bodies))[0])
    return {key: statistics.median(r) for key, r in rates.items()}


def long_conversations(tmp: Path, base_url: str, conversations: int) -> list[tuple[int, float]]:
    """RSS (MB) after every 50 of ``conversations`` distinct ~105K-token conversations, two turns each."""
    agent = build_profiles(("agent105k",))[0]
    out: list[tuple[int, float]] = []
    with run_gateway(tmp, {"models": _models(base_url)}) as gw:
        target = Target("ventana", gw.base_url)
        out.append((0, rss_mb(gw.proc.pid)))

        async def two_turns(first: bytes) -> None:
            follow = orjson.loads(first)
            follow["messages"].append({"role": "user", "content": "And what comes next?"})
            conn = Connection(target)
            try:
                for body in (first, orjson.dumps(follow)):
                    timing = await conn.send(target.request_bytes(body))
                    if timing.status != 200:
                        raise SystemExit(f"long conversations: status {timing.status}")
            finally:
                await conn.close()

        for k in tqdm(range(conversations), desc="long conversations", unit="conv"):
            asyncio.run(two_turns(fresh(agent.body, k)))
            if (k + 1) % 50 == 0:
                out.append((k + 1, rss_mb(gw.proc.pid)))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=10_000)
    parser.add_argument("--quick", action="store_true", help="1,000 requests, fewer rounds")
    parser.add_argument("--long", type=int, default=0, help="also N distinct ~105K-token conversations (RSS)")
    args = parser.parse_args()
    requests = 1_000 if args.quick else args.requests
    with tempfile.TemporaryDirectory(prefix="ventana-service-") as tmp_name:
        tmp = Path(tmp_name)
        with run_simulator(tmp, record=False, cache=False) as sim:
            wall, cpu, imported = startup(tmp, sim.base_url)
            print(f"start-up to /healthz: {wall:.2f} s wall, {cpu:.2f} s CPU (median of 5); litellm: {imported}")
            before, after, errors = memory(tmp, sim.base_url, requests)
            print(f"RSS: {before:.0f} MB at start, {after:.0f} MB after {requests} requests ({errors} failed)")
            for timed in (False, True):
                lags, blocks = loop_lag(tmp, sim.base_url, 3 if args.quick else 8, timed=timed)
                for name, (total, over, bound) in lags.items():
                    what = "callbacks" if name == "callback" else "probe samples"
                    where = "asyncio loop, callbacks timed" if timed else "uvloop"
                    print(f"loop {name} ({where}): {over} of {total} {what} over 5 ms; all <= {bound:g} ms")
                for line in blocks:
                    print("  " + line)
            for cpu_bound in (False, True):
                what = "CPU-bound (199 MetaTool tools pruned per request)" if cpu_bound else "tiny"
                seconds = (2.0 if args.quick else 4.0) if cpu_bound else (1.0 if args.quick else 2.0)
                rates = workers(tmp, sim.base_url, 2 if args.quick else 4, seconds, cpu_bound=cpu_bound)
                print(
                    f"workers, {what} c=32, database session state: "
                    f"{rates[1]:.0f} req/s with 1, {rates[2]:.0f} with 2 ({rates[2] / rates[1]:.2f}x); "
                    f"1 worker with memory session state {rates['memory']:.0f} req/s"
                )
            if args.long:
                points = long_conversations(tmp, sim.base_url, args.long)
                print("RSS with long conversations: " + ", ".join(f"{n}: {mb:.0f} MB" for n, mb in points))


if __name__ == "__main__":
    main()
