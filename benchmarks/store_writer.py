"""The store writer's thread CPU per request of a growing agent session, this checkout against others.

    python -m benchmarks.store_writer [--requests 160] [--end-tokens 130000] [--repeat 3] [--checkout PATH]

The writer runs off the event loop but holds the GIL while it hashes, builds rows and drives
SQLAlchemy, so its CPU per request is loop time a request may wait for. This writes the bodies of
``benchmarks.growing_session`` (each one real mini-swe-agent round longer, the resent history the
same message objects as the gateway's ``sessions.resent`` makes them) one record per transaction
into a fresh SQLite file, as the production writer does at one client, and reports the median
``thread_time`` of ``write_records`` plus its commit by history length. Each checkout runs in a
fresh process (this file as a script, that checkout's ``gateway`` on the path), alternating,
``--repeat`` times; the medians pool the runs.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

BUCKET_TOKENS = 25_000


def child(bodies_path: str) -> None:
    """Runs in a fresh process with one checkout's ``gateway``: print ``[[tokens, us], ...]``."""
    import time
    import uuid

    import orjson

    import gateway  # noqa: F401  (offline tiktoken)
    from gateway.store.engine import make_engine
    from gateway.store.migrate import upgrade
    from gateway.store.record import RequestRecord
    from gateway.store.writer import KnownContent, write_records

    lines = Path(bodies_path).read_bytes().splitlines()
    with tempfile.TemporaryDirectory() as tmp:
        url = f"sqlite:///{tmp}/store.db"
        upgrade(url)
        engine = make_engine(url)
        known, previous, out = KnownContent(), [], []
        for line in lines:
            tokens, body = orjson.loads(line)
            messages = body["messages"]
            messages[: len(previous)] = previous  # the resent history: last turn's objects
            previous = messages
            assembled = {**body, "messages": [*messages, {"role": "user", "content": f"<reminder>{tokens}</reminder>"}]}
            record = RequestRecord.of(
                request_id="req-" + uuid.uuid4().hex[:20],
                session_id="s-growing",
                created_at=time.time(),
                model=body["model"],
                provider="openai",
                caller="c0ffee123456",
                original={**body, "messages": list(messages)},
                assembled=assembled,
            )
            started = time.thread_time()
            with engine.begin() as conn:
                written = write_records(conn, [record], known=known)
            known.update(written.content)
            out.append([tokens, (time.thread_time() - started) * 1e6])
        engine.dispose()
    print(json.dumps(out))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--requests", type=int, default=160)
    parser.add_argument("--start-tokens", type=int, default=13_000)
    parser.add_argument("--end-tokens", type=int, default=130_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--checkout", action="append", default=[], help="another checkout (repeatable)")
    args = parser.parse_args()

    import orjson

    from benchmarks.growing_session import growing_bodies

    here = Path(__file__).resolve().parent.parent
    checkouts = {"this": here, **{Path(c).name: Path(c).resolve() for c in args.checkout}}
    results: dict[str, list[list[float]]] = {name: [] for name in checkouts}
    with tempfile.TemporaryDirectory() as tmp:
        bodies = Path(tmp) / "bodies.jsonl"
        with bodies.open("wb") as fh:
            for tokens, body in growing_bodies(args.requests, args.start_tokens, args.end_tokens):
                fh.write(orjson.dumps([tokens, orjson.loads(body)]) + b"\n")
        for _ in range(args.repeat):
            for name, path in checkouts.items():
                env = {**os.environ, "PYTHONPATH": str(path)}
                done = subprocess.run(
                    [sys.executable, __file__, "--child", str(bodies)],
                    env=env,
                    cwd=path,
                    capture_output=True,
                    check=True,
                )
                results[name] += json.loads(done.stdout.decode().strip().splitlines()[-1])
    table: dict[int, dict[str, list[float]]] = {}
    for name, rows in results.items():
        for tokens, us in rows:
            table.setdefault(int(tokens) // BUCKET_TOKENS, {n: [] for n in checkouts})[name].append(us)
    print("| history | " + " | ".join(f"{n} writer us (median)" for n in checkouts) + " | n |")
    print("| --- | " + " | ".join("---" for _ in checkouts) + " | --- |")
    for bucket, cell in sorted(table.items()):
        values = " | ".join(f"{statistics.median(v):.0f}" for v in cell.values())
        low, high = bucket * BUCKET_TOKENS // 1000, (bucket + 1) * BUCKET_TOKENS // 1000
        print(f"| {low}-{high}K | {values} | {len(cell['this'])} |")
    everything: dict[str, Any] = {n: statistics.median(us for _, us in rows) for n, rows in results.items()}
    print("all requests, median us: " + ", ".join(f"{n} {v:.0f}" for n, v in everything.items()))


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--child":
        sys.path.pop(0)  # this script's folder: its modules must not shadow anything the checkout imports
        child(sys.argv[2])
    else:
        main()
