"""How the context store grows with an agent session, against logging every request body.

An agent resends its whole history every turn. This replays a 100-turn session built
from real conversations (BFCL memory, in ``shared/data``) whose final request is about
100K tokens, through the real ``SqlRecorder`` into a fresh SQLite file (and PostgreSQL
when reachable), and through a naive logger that stores each request body as it came.

Reported: bytes on disk after a checkpoint and VACUUM, as multiples of the final
context's size; and the writer's time per request relative to the naive logger's,
median of ``--repeat`` runs in this same process.

    python -m benchmarks.store_growth [--turns 100] [--per-turn 7] [--repeat 3]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from pathlib import Path

import orjson
from sqlalchemy import Column, Engine, MetaData, String, Table, Text, text
from tqdm import tqdm

import gateway  # noqa: F401  (offline tiktoken)
from gateway.store.content import canonical_json
from gateway.store.engine import make_engine
from gateway.store.migrate import upgrade
from gateway.store.record import MemoryRecorder, RequestRecord
from gateway.store.sql_recorder import SqlRecorder
from gateway.tokens import counter_for
from tests.store.databases import postgres_available, postgres_database
from tests.store.records import agent_session

_naive = MetaData()
NAIVE = Table("naive_log", _naive, Column("request_id", String(64), primary_key=True), Column("body", Text))
STORE_TABLES = ("blobs", "message_nodes", "requests")


async def _store(url: str, records: list[RequestRecord], spool: Path) -> float:
    """Write every record through the real recorder; return seconds until all are committed."""
    recorder = SqlRecorder(database_url=url, spool_path=str(spool), batch_size=1)
    await recorder.start()
    started = time.perf_counter()
    for record in records:
        recorder.record(record)
        await asyncio.sleep(0)  # the gateway yields between requests; let the writer pick the record up
    await recorder.close()
    assert recorder.written == len(records), recorder.status()
    return time.perf_counter() - started


def _naive_log(engine: Engine, records: list[RequestRecord]) -> float:
    """One row per request with the body it sent and the answer: what logging each request stores.

    Only the client's body is logged (not also the assembled one), which is the kindest
    baseline: a log of both bodies would be twice as large.
    """
    _naive.create_all(engine)
    started = time.perf_counter()
    for record in records:
        body = orjson.dumps({"request": record.original, "answer": record.response_text})
        with engine.begin() as conn:
            conn.execute(NAIVE.insert(), {"request_id": record.request_id, "body": body.decode()})
    return time.perf_counter() - started


def _sqlite_bytes(path: Path) -> int:
    engine = make_engine(f"sqlite:///{path}")
    with engine.connect() as conn:
        conn.exec_driver_sql("PRAGMA wal_checkpoint(TRUNCATE)")
        conn.exec_driver_sql("VACUUM")
    engine.dispose()
    return sum(p.stat().st_size for p in path.parent.glob(path.name + "*"))


def _pg_bytes(engine: Engine, tables: tuple[str, ...]) -> int:
    with engine.connect() as conn:
        conn.execution_options(isolation_level="AUTOCOMMIT").exec_driver_sql("VACUUM FULL")
        return sum(int(conn.scalar(text(f"SELECT pg_total_relation_size('{t}')")) or 0) for t in tables)


def run_sqlite(records: list[RequestRecord], work: Path, tag: str) -> tuple[int, int, float, float]:
    store_path, naive_path = work / f"store-{tag}.db", work / f"naive-{tag}.db"
    upgrade(f"sqlite:///{store_path}")
    store_s = asyncio.run(_store(f"sqlite:///{store_path}", records, work / f"spool-{tag}.jsonl"))
    naive_engine = make_engine(f"sqlite:///{naive_path}")
    naive_s = _naive_log(naive_engine, records)
    naive_engine.dispose()
    return _sqlite_bytes(store_path), _sqlite_bytes(naive_path), store_s, naive_s


def run_postgres(records: list[RequestRecord], work: Path) -> tuple[int, int]:
    with postgres_database() as url:
        upgrade(url)
        asyncio.run(_store(url, records, work / "spool-pg.jsonl"))
        engine = make_engine(url)
        try:
            _naive_log(engine, records)
            return _pg_bytes(engine, STORE_TABLES), _pg_bytes(engine, ("naive_log",))
        finally:
            engine.dispose()


def with_reminder(records: list[RequestRecord]) -> list[RequestRecord]:
    """The same session as a gateway with passes on sends it: a new ``<reminder>`` message every turn."""
    out = []
    for record in records:
        reminder = {"role": "user", "content": f"<reminder>turn {record.turn}: cite the facts you use</reminder>"}
        assembled = {**record.original, "messages": [*record.original["messages"], reminder]}
        out.append(record.changed(assembled=assembled))
    return out


def report(records: list[RequestRecord], repeat: int, label: str) -> None:
    final = records[-1].original
    final_bytes = len(canonical_json(final))
    final_tokens = counter_for("o200k_base").request(final["messages"], final.get("tools"))
    print(f"{label}: {len(records)} turns, final context {final_tokens} tokens / {final_bytes} bytes")
    runs = []
    with tempfile.TemporaryDirectory(prefix="ventana-bench-") as tmp:
        for i in tqdm(range(repeat), desc=f"{label} sqlite runs"):
            runs.append(run_sqlite(records, Path(tmp), str(i)))
        store_b, naive_b = runs[0][0], runs[0][1]
        ratio = statistics.median(r[2] / r[3] for r in runs)
        per_req = statistics.median(r[2] for r in runs) / len(records) * 1000
        print(f"  sqlite store  : {store_b:>11,} bytes = {store_b / final_bytes:6.2f}x the final context")
        print(f"  sqlite naive  : {naive_b:>11,} bytes = {naive_b / final_bytes:6.2f}x the final context")
        print(f"  write time store/naive (median of {repeat}): {ratio:.2f}x; store {per_req:.2f} ms/request")
        if postgres_available():
            pg_store, pg_naive = run_postgres(records, Path(tmp))
            print(f"  postgres store: {pg_store:>11,} bytes = {pg_store / final_bytes:6.2f}x the final context")
            print(f"  postgres naive: {pg_naive:>11,} bytes = {pg_naive / final_bytes:6.2f}x (TOAST compresses)")


def record_call_cost(records: list[RequestRecord], repeat: int) -> None:
    """Time ``record()`` itself (the only store work on the request path) against a list append."""

    async def one(recorder: SqlRecorder | MemoryRecorder) -> float:
        started = time.perf_counter_ns()
        for record in records:
            recorder.record(record)
        return (time.perf_counter_ns() - started) / len(records)

    sql_ns, mem_ns = [], []
    for _ in range(repeat):
        sql = SqlRecorder(database_url="sqlite://", queue_size=len(records) + 1)  # not started: no writer competes
        sql_ns.append(asyncio.run(one(sql)))
        mem_ns.append(asyncio.run(one(MemoryRecorder())))
    sql_med, mem_med = statistics.median(sql_ns), statistics.median(mem_ns)
    print(f"record() call: SqlRecorder {sql_med:.0f} ns, MemoryRecorder {mem_med:.0f} ns ({sql_med / mem_med:.1f}x)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--turns", type=int, default=100)
    parser.add_argument("--per-turn", type=int, default=7, help="real user messages joined into each turn")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    records = list(agent_session(args.turns, per_turn=args.per_turn))
    report(records, args.repeat, "passthrough (assembled = original)")
    report(with_reminder(records), args.repeat, "with a per-turn reminder")
    record_call_cost(records, max(args.repeat, 5))


if __name__ == "__main__":
    main()
