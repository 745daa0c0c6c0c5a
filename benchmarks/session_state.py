"""What sharing session state costs per turn: the memory store against the shared backends.

    python -m benchmarks.session_state [--sessions 20] [--turns 30]

Each turn does what ``api/chat.py`` does around assembly: load the state, read the
session's finished checkpoints (``adopt``), save the new state. The state carries what a
compacting agent session carries (ToolBench tool names, three checkpoints whose summaries
are real ToolBench text, a previous prefix). Backends, measured in the same run:

- ``memory``: the in-process store (the baseline);
- ``sqlite``: the shared store on a SQLite file (one machine, ``--workers N``);
- ``postgresql``: the shared store on a fresh PostgreSQL database on 127.0.0.1;
- ``postgresql+redis``: the same with Redis on 127.0.0.1 as the read cache.

Also times one summary claim (``claim`` + ``finish``) per backend. Prints medians and p95
in microseconds and each median's ratio to the memory store's.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any

import orjson
from sqlalchemy import create_engine, text
from tqdm import tqdm

from gateway.assembly.context import Checkpoint, SessionState
from gateway.sessions.checkpoints import publish_checkpoints, published_checkpoints
from gateway.sessions.memory import MemorySessionStore
from gateway.sessions.shared import SharedSessionStore
from gateway.store.migrate import upgrade
from tests.shared_data import data_path

PG_ADMIN = "postgresql+psycopg://postgres@127.0.0.1:5432/test"
REDIS_URL = "redis://127.0.0.1:6379/0"
DATA = data_path("toolbench.jsonl")


def _state(session_id: str) -> SessionState:
    lines = DATA.read_bytes().splitlines() if DATA.exists() else []
    runs = [orjson.loads(line) for line in lines[:3]]
    texts = [" ".join(str(m.get("content") or "") for m in r["messages"])[:1600] for r in runs] or ["x" * 1600] * 3
    tools = tuple(t["function"]["name"] for r in runs for t in r["tools"])[:12]
    cps = tuple(Checkpoint(f"range-{i}", 2, 10 + 8 * i, texts[i % len(texts)], "llm:gpt-4o-mini") for i in range(3))
    prefix = tuple(f"{k}:{uuid.uuid4().hex[:16]}" for k in ("system", "tools", "history"))
    return SessionState(session_id=session_id, turn=0, tool_set=tools, checkpoints=cps, previous_prefix=prefix)


async def _turn(store: Any, session_id: str) -> float:
    started = time.perf_counter()
    state = await store.load(session_id)
    await published_checkpoints(store, session_id, 1.0)
    await store.save(replace(state, turn=state.turn + 1))
    return (time.perf_counter() - started) * 1e6


async def _measure(store: Any, sessions: int, turns: int, label: str) -> tuple[list[float], list[float]]:
    ids = [f"bench-{uuid.uuid4().hex[:8]}-{i}" for i in range(sessions)]
    for sid in ids:
        state = _state(sid)
        await store.save(state)
        publish_checkpoints(store, sid, state.checkpoints)
    per_turn: list[float] = []
    for _ in tqdm(range(turns), desc=label, unit="round"):
        for sid in ids:  # round robin over sessions, as interleaved traffic arrives
            per_turn.append(await _turn(store, sid))
    claims: list[float] = []
    for i in range(sessions * 5):
        started = time.perf_counter()
        key = f"sum:bench-{uuid.uuid4().hex}-{i}"
        store.claim(key)
        store.finish(key, '{"text": "summary"}')
        claims.append((time.perf_counter() - started) * 1e6)
    return per_turn[sessions:], claims  # the first round warms pools and caches


@contextmanager
def _postgres() -> Iterator[str]:
    name = "ventana_bench_" + uuid.uuid4().hex[:8]
    admin = create_engine(PG_ADMIN, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(text(f'CREATE DATABASE "{name}"'))
    url = PG_ADMIN.rsplit("/", 1)[0] + "/" + name
    try:
        upgrade(url)
        yield url
    finally:
        with admin.connect() as conn:
            conn.execute(text(f'DROP DATABASE "{name}" WITH (FORCE)'))
        admin.dispose()


def _row(label: str, turns: list[float], claims: list[float], base: float) -> str:
    med, p95 = statistics.median(turns), statistics.quantiles(turns, n=20)[-1]
    return f"| {label} | {med:.0f} us | {p95:.0f} us | {med / base:.2f} | {statistics.median(claims):.0f} us |"


async def _main(sessions: int, turns: int) -> None:
    results: dict[str, tuple[list[float], list[float]]] = {}
    results["memory"] = await _measure(MemorySessionStore(), sessions, turns, "memory")
    with tempfile.TemporaryDirectory() as tmp:
        url = f"sqlite:///{Path(tmp) / 'state.db'}"
        upgrade(url)
        store = SharedSessionStore(url, owner="bench")
        results["sqlite"] = await _measure(store, sessions, turns, "sqlite")
        await store.close()
    with _postgres() as url:
        store = SharedSessionStore(url, owner="bench")
        results["postgresql"] = await _measure(store, sessions, turns, "postgresql")
        await store.close()
        store = SharedSessionStore(url, redis_url=REDIS_URL, owner="bench")
        results["postgresql+redis"] = await _measure(store, sessions, turns, "postgresql+redis")
        await store.close()
    base = statistics.median(results["memory"][0])
    print("| backend | per turn, median | p95 | ratio to memory (median) | one claim + finish, median |")
    print("| --- | --- | --- | --- | --- |")
    for label, (per_turn, claims) in results.items():
        print(_row(label, per_turn, claims, base))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=20)
    parser.add_argument("--turns", type=int, default=30)
    args = parser.parse_args()
    asyncio.run(_main(args.sessions, args.turns))


if __name__ == "__main__":
    main()
