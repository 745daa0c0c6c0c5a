"""What the gateway adds to an agent session that grows, against a fixed prefix of the same length.

    python -m benchmarks.growing_session [--requests 300] [--start-tokens 13000] [--end-tokens 210000]
                                         [--fixed-every 10] [--checkout PATH] [--runs 1]

Real agents resend their whole history every turn, one round longer each time: the gateway sees
each request's history for the first time only in its newest round. The fixed profiles of
``benchmarks.overhead`` resend one body, so they measure a history the gateway has fully
remembered. This benchmark drives one client whose session grows from ``--start-tokens`` to
``--end-tokens`` over ``--requests`` requests, built from real mini-swe-agent rounds
(``shared/data/agent_loops/mini_swe_agent_deepseek.jsonl``), sending each request to the
simulator directly and through the gateway (interleaved, in an order shuffled every request, so
drift and slot hit all alike). Every ``--fixed-every`` requests it also sends that request's
body 5 more times (the fixed shape at that length). The result is the added median time by
history length for both shapes, and the paired gap: at each fixed point, the growing requests
within ``PAIR_SPAN`` of it against its own repeats (same length, same minute of the run), the
median of those gaps per bucket. A machine whose speed swings by the minute moves both sides of
a pair alike; the bucket medians alone compared a handful of fixed samples (5 at 100-125K with
the old default of one point every 30 requests) with ~40 growing ones from other minutes.

The model is ``gpt-4.1-mini`` (a 1M-token window) so no compaction interferes with the growth:
what is measured is the per-request cost of a longer history, not of a summary. ``--checkout``
adds a gateway from another checkout (e.g. a worktree of an older commit) in the same run.
JSON goes to ``benchmarks/out/growing-<time>.json``.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import orjson
from tqdm import tqdm

import gateway  # noqa: F401  (offline tiktoken before counting)
from benchmarks import machine
from benchmarks.loadclient import Connection, Target, shuffled
from benchmarks.overhead import _merge, variant_config
from benchmarks.profiles import _renumbered, _runs, _steps
from gateway.tokens import counter_for
from tests.procs import run_gateway, run_simulator
from tests.shared_data import data_path

OUT = Path(__file__).resolve().parent / "out"
MODEL = "gpt-4.1-mini"
LOOPS = data_path("agent_loops", "mini_swe_agent_deepseek.jsonl")
BUCKET_TOKENS = 25_000
FIXED_REPEATS = 5
#: Growing requests on each side of a fixed point that are paired with it.
PAIR_SPAN = 5


def growing_bodies(requests: int, start_tokens: int, end_tokens: int) -> Iterator[tuple[int, bytes]]:
    """``requests`` bodies of one session, each the previous one plus real rounds: (tokens, body)."""
    runs = _runs(LOOPS)
    first = runs[0]
    counter = counter_for("o200k_base")
    tools = first["tools"]
    messages: list[dict[str, Any]] = [dict(m) for m in first["messages"][:2]]  # the system prompt and the task
    steps = _steps(runs)
    per_request = (end_tokens - start_tokens) / max(1, requests - 1)
    k = 0

    def grow_to(target: float) -> int:
        nonlocal k
        tokens = counter.request(messages, tools)
        while tokens < target:
            chunk = _renumbered(steps[k % len(steps)], k)
            messages.extend(chunk)
            tokens += counter.messages(chunk)
            k += 1
        return tokens

    for i in range(requests):
        tokens = grow_to(start_tokens + i * per_request)
        yield tokens, orjson.dumps({"model": MODEL, "messages": messages, "tools": tools, "max_tokens": 32})


async def timed(conn: Connection, payload: bytes, name: str) -> float:
    timing = await conn.send(payload)
    if timing.status != 200:
        raise RuntimeError(f"{name} answered {timing.status}")
    return timing.end * 1000


async def measure(targets: dict[str, Target], args: argparse.Namespace) -> list[dict[str, Any]]:
    conns = {name: Connection(t) for name, t in targets.items()}
    rows: list[dict[str, Any]] = []
    bodies = growing_bodies(args.requests, args.start_tokens, args.end_tokens)
    try:
        for i, (tokens, body) in enumerate(tqdm(bodies, total=args.requests, desc="growing session", unit="req")):
            row: dict[str, Any] = {"i": i, "tokens": tokens, "shape": "growing"}
            for name, target in shuffled(targets, i):
                row[name] = await timed(conns[name], target.request_bytes(body), name)
            rows.append(row)
            if i % args.fixed_every == 0:
                for repeat in range(FIXED_REPEATS):
                    fixed: dict[str, Any] = {"i": i, "tokens": tokens, "shape": "fixed"}
                    for name, target in shuffled(targets, i * FIXED_REPEATS + repeat + 1_000_000):
                        fixed[name] = await timed(conns[name], target.request_bytes(body), name)
                    rows.append(fixed)
    finally:
        for conn in conns.values():
            await conn.close()
    return rows


def summarise(rows: list[dict[str, Any]], names: list[str]) -> list[dict[str, Any]]:
    """Per history bucket and shape: the median added ms of each gateway over direct."""
    table: dict[tuple[int, str], dict[str, list[float]]] = {}
    for row in rows:
        key = (row["tokens"] // BUCKET_TOKENS, row["shape"])
        cell = table.setdefault(key, {n: [] for n in names})
        for n in names:
            cell[n].append(row[n] - row["direct"])
    gaps = paired_gaps(rows, names)
    out = []
    for (bucket, shape), cell in sorted(table.items()):
        entry: dict[str, Any] = {
            "history": f"{bucket * BUCKET_TOKENS // 1000}-{(bucket + 1) * BUCKET_TOKENS // 1000}K",
            "shape": shape,
            "n": len(cell[names[0]]),
        }
        entry.update({f"{n} added p50 ms": round(statistics.median(v), 2) for n, v in cell.items()})
        if shape == "growing":
            for n in names:
                pairs = gaps.get((bucket, n), [])
                if pairs:
                    entry[f"{n} growing - fixed, paired p50 ms"] = round(statistics.median(pairs), 2)
                    entry["pairs"] = len(pairs)
        out.append(entry)
    return out


def paired_gaps(rows: list[dict[str, Any]], names: list[str]) -> dict[tuple[int, str], list[float]]:
    """Per (bucket, gateway): at each fixed point of each run, the median added ms of the growing
    requests within ``PAIR_SPAN`` of it minus the median added ms of its fixed repeats."""
    points: dict[tuple[Any, int], list[dict[str, Any]]] = {}
    growing: dict[tuple[Any, int], dict[str, Any]] = {}
    for row in rows:
        key = (row.get("run", 0), row["i"])
        if row["shape"] == "fixed":
            points.setdefault(key, []).append(row)
        else:
            growing[key] = row
    out: dict[tuple[int, str], list[float]] = {}
    for (run, i), repeats in points.items():
        near = [growing[(run, j)] for j in range(i - PAIR_SPAN, i + PAIR_SPAN + 1) if (run, j) in growing]
        if not near:
            continue
        bucket = repeats[0]["tokens"] // BUCKET_TOKENS
        for n in names:
            grown = statistics.median(r[n] - r["direct"] for r in near)
            fixed = statistics.median(r[n] - r["direct"] for r in repeats)
            out.setdefault((bucket, n), []).append(grown - fixed)
    return out


def one_run(args: argparse.Namespace) -> tuple[list[str], list[dict[str, Any]]]:
    """One session through fresh gateways and a fresh simulator: the gateways' names and the rows."""
    with tempfile.TemporaryDirectory() as tmp_name, ExitStack() as stack:
        tmp = Path(tmp_name)
        sim = stack.enter_context(run_simulator(tmp, record=False, cache=False))
        models = [{"name": MODEL, "litellm_model": f"openai/{MODEL}", "api_base": sim.base_url}]
        gw = stack.enter_context(run_gateway(tmp, {"models": models}))
        targets = {"direct": Target("direct", sim.base_url), "ventana": Target("ventana", gw.base_url)}
        if args.variant:
            variant = {"models": models, "database_url": f"sqlite:///{tmp}/variant.db"}
            config = _merge(variant, variant_config(args.variant))
            other = stack.enter_context(run_gateway(tmp, config))
            targets[f"ventana[{args.variant}]"] = Target("variant", other.base_url)
        if args.checkout:
            config = {"models": models, "database_url": f"sqlite:///{tmp}/checkout.db"}
            env = {"PYTHONPATH": str(Path(args.checkout).resolve())}
            other = stack.enter_context(run_gateway(tmp, config, env=env))
            targets[f"ventana[{Path(args.checkout).name}]"] = Target("checkout", other.base_url)
        rows = asyncio.run(measure(targets, args))
    return [n for n in targets if n != "direct"], rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--requests", type=int, default=300)
    parser.add_argument("--start-tokens", type=int, default=13_000)
    parser.add_argument("--end-tokens", type=int, default=210_000)
    parser.add_argument("--fixed-every", type=int, default=10, help="a fixed point every N requests (default 10)")
    parser.add_argument("--checkout", default="", help="another checkout's gateway in the same run")
    parser.add_argument("--variant", default="", help="also a gateway with these config changes, e.g. a.b=false")
    parser.add_argument(
        "--runs", type=int, default=1, help="repeat with fresh processes, rows pooled (a shared machine swings)"
    )
    args = parser.parse_args()
    host = machine.describe()  # before any process of the run starts
    rows: list[dict[str, Any]] = []
    for run in range(args.runs):
        names, more = one_run(args)
        rows.extend({**row, "run": run} for row in more)
    table = summarise(rows, names)
    print(machine.summary(host))
    for entry in table:
        print("  ".join(f"{k}={v}" for k, v in entry.items()))
    OUT.mkdir(exist_ok=True)
    path = OUT / f"growing-{time.strftime('%Y%m%dT%H%M%S')}.json"
    raw = {"args": vars(args), "machine": host, "table": table, "rows": rows}
    path.write_bytes(orjson.dumps(raw, option=orjson.OPT_INDENT_2))
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
