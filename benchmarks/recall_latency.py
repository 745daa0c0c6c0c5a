"""What one inline recall lookup costs once a session has an archive (the turns without one skip it).

    python -m benchmarks.recall_latency --passages 300 --runs 20

An archive of ``--passages`` rhelm turns (or generated ones without the data) is stored in a
SQLite file with vectors (random unit vectors: archiving cost is not what is measured here),
then ``MemoryRuntime._rank``'s search is timed for new questions with three newest turns as the
tail: cold (question and tail never seen) and warm (the tail's vectors remembered, as on the
next turn of a session). BM25 alone is timed on the same rows without vectors.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np
import orjson

import gateway  # noqa: F401  (offline tiktoken)
from gateway.memory import vectors
from gateway.memory.archive import archive, passages_of, search
from gateway.store.engine import make_engine
from gateway.store.migrate import upgrade
from gateway.tokens import counter_for
from tests.shared_data import shared_path

COUNTER = counter_for("o200k_base")


def _messages(count: int) -> list[dict[str, str]]:
    try:
        path = shared_path("data", "long_conversations", "rhelm.jsonl")
        cases = [orjson.loads(line) for line in path.read_bytes().splitlines() if line]
        messages = [m for c in cases for m in c["messages"]][: count * 2]
    except FileNotFoundError:
        messages = []
    if len(messages) < count * 2:
        messages = [
            {"role": "user" if i % 2 == 0 else "assistant", "content": f"Turn {i // 2}: we talked about topic {i}."}
            for i in range(count * 2)
        ]
    return messages


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--passages", type=int, default=300)
    parser.add_argument("--runs", type=int, default=20)
    args = parser.parse_args()
    messages = _messages(args.passages)
    rows = passages_of(messages, 0, len(messages), 300, COUNTER.text)
    rng = np.random.default_rng(7)
    with tempfile.TemporaryDirectory(prefix="ventana-recall-latency-") as tmp:
        url = f"sqlite:///{Path(tmp) / 'lat.db'}"
        upgrade(url)
        engine = make_engine(url)
        with_vectors = []
        for r in rows:
            v = rng.normal(size=vectors.DIM).astype(np.float32)
            with_vectors.append({**r, "vector": vectors.to_bytes(v / np.linalg.norm(v))})
        archive(engine, "fused", "caller:lat", with_vectors)
        archive(engine, "bm25", "caller:lat", rows)
        tail = [r["text"] for r in rows[-3:]]
        timings: dict[str, list[float]] = {"bm25": [], "fused, cold": [], "fused, warm": []}
        for k in range(args.runs):
            question = f"What did we decide about the trip in week {k}, and who booked the hotel {k}?"
            for label, session, turns in (
                ("bm25", "bm25", tail),
                ("fused, cold", "fused", [f"{t} ({k})" for t in tail]),
                ("fused, warm", "fused", tail),
            ):
                start = time.perf_counter()
                search(engine, question + label, session_id=session, tail=turns)
                timings[label].append((time.perf_counter() - start) * 1000)
        engine.dispose()
    print(f"\n{len(rows)} archived passages, {args.runs} questions, embeddings: {vectors.available()}\n")
    print("| lookup | median ms | p90 ms |")
    print("| --- | --- | --- |")
    for label, values in timings.items():
        values.sort()
        print(f"| {label} | {statistics.median(values):.1f} | {values[int(0.9 * (len(values) - 1))]:.1f} |")


if __name__ == "__main__":
    main()
