"""Usage profiles through served gateways: learnt by one process, used by the next, shared by workers.

The offline benchmark (``tool_pruning --profiles-from tune``) feeds MetaTool-47's tuning half to
the profiles directly. Here the same learning goes through ``ventana serve`` over HTTP, the way
a deployment learns: each tuning query is sent once per needed tool with ``tool_choice`` naming
it, and the provider simulator calls that tool. Held-out queries are then sent unforced, each
in its own session, and recall and tool tokens removed are read from the recorded
``prune_tools`` decisions. Phases, one run, one simulator:

- ``cold``: a gateway that never saw a call (the description-only baseline);
- ``restarted``: the tuning half taught to one gateway, which is stopped; a new gateway
  process on the same database answers the held-out half;
- ``2 workers``: a ``--workers 2`` gateway taught and evaluated without a restart (each teaching
  request reaches one worker; the profiles reach both through the store);
- ``2 workers, not persisted``: the same with ``usage_persist: false``, where each worker learns
  only from the requests it happened to serve.

Also the cost of a sync: the median time to merge one worker's delta for every tool of the list,
on SQLite and PostgreSQL (when reachable).

    python -m benchmarks.tool_profiles_served [--limit N] [--no-postgres] [--parts served,sync]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
import openai
from sqlalchemy import select

from benchmarks.tool_cases import ToolCase, selection_cases, split_cases
from gateway.assembly.tool_scoring.usage_profiles import Delta
from gateway.store.engine import make_engine
from gateway.store.migrate import upgrade
from gateway.store.models import Request
from gateway.store.tool_profiles import ToolProfileStore
from tests.procs import GatewayHandle, SimHandle, run_gateway, run_simulator, sim_models

POLICY = {"scorer": "embedding_sentences", "budget_share": 0.4, "max_tools": 47, "min_offered": 17}
SYNC_S = 1.0
CLIENTS = 4


def config(sim: SimHandle, db: Path, **tools: Any) -> dict[str, Any]:
    return {
        "models": sim_models(sim.base_url),
        "database_url": f"sqlite:///{db}",
        "policy": {"tools": {**POLICY, "usage_sync_s": SYNC_S, **tools}},
    }


def send(base_url: str, jobs: Sequence[tuple[str, ToolCase, str | None]]) -> None:
    """Each job: (session id, case, tool to force or None), sent by a few concurrent clients."""
    client = openai.OpenAI(base_url=base_url, api_key="sk-bench", max_retries=2)

    def one(job: tuple[str, ToolCase, str | None]) -> None:
        session, case, force = job
        extra: dict[str, Any] = {"tool_choice": {"type": "function", "function": {"name": force}}} if force else {}
        client.chat.completions.create(
            model="gpt-4o-mini",
            messages=case.messages,  # type: ignore[arg-type]
            tools=case.tools,  # type: ignore[arg-type]
            extra_headers={"x-session-id": session},
            **extra,
        )

    with ThreadPoolExecutor(CLIENTS) as pool:
        list(pool.map(one, jobs))


def teach(gw: GatewayHandle, tune: Sequence[ToolCase]) -> None:
    send(gw.base_url, [(f"teach-{c.id}-{n}", c, n) for c in tune for n in sorted(c.expected)])


def evaluate(gw: GatewayHandle, heldout: Sequence[ToolCase], tag: str) -> None:
    send(gw.base_url, [(f"{tag}-{c.id}", c, None) for c in heldout])


def score(db: Path, heldout: Sequence[ToolCase], tag: str) -> tuple[float, float, int]:
    """Recall, tool tokens removed and requests found, from the recorded decisions of ``tag``'s requests."""
    engine = make_engine(f"sqlite:///{db}")
    with engine.connect() as conn:
        query = select(Request.session_id, Request.decisions).where(Request.session_id.like(f"{tag}-%"))
        rows = {session: decisions for session, decisions in conn.execute(query)}
    engine.dispose()
    found = needed = before = after = 0
    for case in heldout:
        decisions = rows.get(f"{tag}-{case.id}")
        if decisions is None:
            continue
        pruned = next(d for d in decisions if d.get("pass") == "prune_tools" and d.get("action") == "pruned")
        kept = set(pruned["detail"]["kept"])
        needed += len(case.expected)
        found += len(case.expected & kept)
        before += pruned["tokens_before"]
        after += pruned["tokens_after"]
    return found / max(needed, 1), 1 - after / max(before, 1), len(rows)


def served(cases: list[ToolCase], tmp: Path) -> list[str]:
    tune, heldout = split_cases(cases, "tune"), split_cases(cases, "heldout")
    rows = [
        f"Held-out {len(heldout)} cases, taught {len(tune)} tuning cases ({sum(len(c.expected) for c in tune)} calls)"
    ]
    rows += ["", "| phase | recall | tool tokens removed | requests scored |", "| --- | --- | --- | --- |"]
    with run_simulator(tmp, record=False) as sim:
        db = tmp / "cold.db"
        with run_gateway(tmp, config(sim, db)) as gw:
            evaluate(gw, heldout, "cold")
        rows.append(row("cold (no calls seen)", score(db, heldout, "cold")))

        db = tmp / "restart.db"
        with run_gateway(tmp, config(sim, db)) as gw:
            teach(gw, tune)
        with run_gateway(tmp, config(sim, db)) as gw:  # a new process: only the store carries the profiles
            evaluate(gw, heldout, "restarted")
        rows.append(row("taught, then restarted", score(db, heldout, "restarted")))

        for label, persist in (("2 workers", True), ("2 workers, not persisted", False)):
            db = tmp / f"workers-{persist}.db"
            with run_gateway(tmp, config(sim, db, usage_persist=persist), workers=2) as gw:
                teach(gw, tune)
                time.sleep(3 * SYNC_S)  # every worker has merged and read back
                evaluate(gw, heldout, "workers")
            rows.append(row(label, score(db, heldout, "workers")))
    return rows


def row(label: str, result: tuple[float, float, int]) -> str:
    recall, removed, n = result
    return f"| {label} | {recall:.4f} | {removed:.1%} | {n} |"


def sync_cost(cases: list[ToolCase], tmp: Path, postgres: bool) -> list[str]:
    """Median ms to merge a delta touching every tool of the list (47 rows), and to read back what changed."""
    from gateway.assembly.tool_scoring.usage_profiles import tool_keys

    keys = list(tool_keys(cases[0].tools).values())
    rng = np.random.default_rng(7)
    urls = [("SQLite", f"sqlite:///{tmp / 'sync.db'}")]
    if postgres:
        from tests.store.databases import postgres_available

        if postgres_available():
            urls.append(("PostgreSQL", "postgres"))
    out = ["", "| database | merge 47 tools, median ms | read back 47 rows, median ms |", "| --- | --- | --- |"]
    for name, url in urls:
        with _database(url) as real_url:
            upgrade(real_url)
            store = ToolProfileStore(real_url, "bench")
            merges, reads = [], []
            for _ in range(40):
                delta = {k: Delta(rng.standard_normal(384).astype(np.float32), 3) for k in keys}
                t0 = time.perf_counter()
                store.merge(delta)
                t1 = time.perf_counter()
                store.load(since=time.time() - 60)
                t2 = time.perf_counter()
                merges.append((t1 - t0) * 1000)
                reads.append((t2 - t1) * 1000)
            store.close()
            out.append(f"| {name} | {statistics.median(merges):.2f} | {statistics.median(reads):.2f} |")
    return out


@contextmanager
def _database(url: str) -> Iterator[str]:
    if url != "postgres":
        yield url
        return
    from tests.store.databases import postgres_database

    with postgres_database() as pg:
        yield pg


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--limit", type=int, default=None, help="only the first N MetaTool-47 cases (a smoke run)")
    parser.add_argument("--no-postgres", action="store_true", help="skip the PostgreSQL sync cost")
    parser.add_argument("--parts", default="served,sync", help="comma list of: served, sync")
    args = parser.parse_args(argv)
    parts = set(args.parts.split(","))
    cases = [c for c in selection_cases("metatool.jsonl") if len(c.tools) == 47][: args.limit]
    with tempfile.TemporaryDirectory(prefix="ventana-profiles-") as tmp:
        lines = served(cases, Path(tmp)) if "served" in parts else []
        lines += sync_cost(cases, Path(tmp), not args.no_postgres) if "sync" in parts else []
        for line in lines:
            print(line, flush=True)


if __name__ == "__main__":
    main()
