"""What naming a headerless request costs when the conversation index lives in the shared store.

One conversation grows by two messages a turn; each turn is named against the shared index
(PostgreSQL, a fresh database of this run's own) and against the in-process index, and one
session-state load is timed beside them for scale. Run:

    python -m benchmarks.conversation_index --turns 150
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
import uuid
from typing import Any

from sqlalchemy import create_engine, text

from gateway.sessions.conversations import ConversationIndex
from gateway.sessions.shared import SharedSessionStore
from gateway.store.migrate import upgrade

PG_ADMIN = "postgresql+psycopg://postgres@127.0.0.1:5432/test"


async def _measure(url: str, turns: int) -> dict[str, list[float]]:
    store = SharedSessionStore(url)
    index = ConversationIndex()
    messages: list[dict[str, Any]] = [{"role": "system", "content": "sys"}, {"role": "user", "content": "go"}]
    times: dict[str, list[float]] = {"shared index (PostgreSQL)": [], "in-process index": [], "one state load": []}
    for turn in range(turns):
        t = time.perf_counter()
        await index.name("caller-a", "s-open", messages, store)
        times["shared index (PostgreSQL)"].append(time.perf_counter() - t)
        t = time.perf_counter()
        index.name_local("caller-b", "s-open", messages)
        times["in-process index"].append(time.perf_counter() - t)
        t = time.perf_counter()
        await store.load("caller-a/s-open")
        times["one state load"].append(time.perf_counter() - t)
        messages = [*messages, {"role": "assistant", "content": f"a{turn}"}, {"role": "user", "content": f"u{turn}"}]
    await store.close()
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--turns", type=int, default=150)
    args = parser.parse_args()
    name = "ventana_bench_" + uuid.uuid4().hex[:8]
    admin = create_engine(PG_ADMIN, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(text(f'CREATE DATABASE "{name}"'))
    try:
        url = PG_ADMIN.rsplit("/", 1)[0] + "/" + name
        upgrade(url)
        for label, xs in asyncio.run(_measure(url, args.turns)).items():
            xs = sorted(xs)
            print(f"{label}: median {statistics.median(xs) * 1e3:.2f} ms, p95 {xs[int(len(xs) * 0.95)] * 1e3:.2f} ms")
    finally:
        with admin.connect() as conn:
            conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()


if __name__ == "__main__":
    main()
