"""How long the turn after a session's first large compaction waits for its archive.

    python -m benchmarks.archive_wait                       # every source, two windows each
    python -m benchmarks.archive_wait --sources rhelm --variant policy.memory.embed_per_archive=100000

A client that brings a long history to the gateway at once (a session moved onto it, a first
turn of 100K tokens) has most of it compacted on that turn, and the memory edge archives what
compaction replaced, in a background task; the session's next turn waits for that task so its
recall misses nothing. This replays that pair of turns through a real gateway process (real
HTTP, the official openai SDK) to the provider simulator: turn 1 is the whole history, turn 2
the same history with turn 1's answer and a new question, sent as soon as turn 1 is answered,
as a fast agent does. Per source and window, on a fresh gateway and store, the pair runs twice
in two sessions: the first pays the process's one load of the encoder, the second is what a
gateway that has been serving pays. It reports both turns' wall time (turn 2 of the first
session too), the passages the second session archived and how many of them were given vectors
(``memory/vectors.py``) by the time its turn 2 was answered, read from the gateway's SQLite store.

Sources (real data): ``agent105k`` (the ToolBench agent profile of ``benchmarks.overhead``), the
longest rhelm conversation cut to ~100K tokens (``long_conversations/rhelm.jsonl``), and the longest
runs of ``agent_loops/mini_swe_agent_deepseek.jsonl`` and ``agent_loops/tau2_telecom_default.jsonl``.
Windows: the history at 80 % of the window (compacted on turn 1, since it is past 55 %) and at 160 %
(over the window: compacted hard).
"""

from __future__ import annotations

import argparse
import sqlite3
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import openai
import orjson

import gateway  # noqa: F401  (offline tiktoken)
from benchmarks.agent_loops import _clean, load_runs
from benchmarks.overhead import _merge, variant_config
from benchmarks.profiles import build_agent
from gateway.tokens import counter_for
from tests.procs import run_gateway, run_simulator
from tests.shared_data import data_rows

COUNTER = counter_for("o200k_base")
RHELM_TOKENS = 100_000
QUESTION = "Before we go on: what did we settle on earlier, at the very start?"
SOURCES = ("agent105k", "rhelm", "mini_swe_agent", "tau2")


def source(name: str) -> tuple[list[dict[str, Any]], list[dict[str, Any]] | None]:
    """A source's history (ending where a client would send it) and its tools."""
    if name == "agent105k":
        body = orjson.loads(build_agent("agent105k", messages=287, tokens=105_000).body)
        return body["messages"], body["tools"]
    if name == "rhelm":
        rows = data_rows("long_conversations/rhelm.jsonl")
        longest = max(rows, key=lambda r: len(r["messages"]))["messages"]
        out: list[dict[str, Any]] = []
        for m in longest:
            out.append({"role": m["role"], "content": m["content"]})
            if COUNTER.request(out) >= RHELM_TOKENS and m["role"] == "assistant":
                break
        return out, None
    file = {"mini_swe_agent": "mini_swe_agent_deepseek.jsonl", "tau2": "tau2_telecom_default.jsonl"}[name]
    run = load_runs(file, 1)[0]
    messages = [_clean(m) for m in run["messages"]]
    while messages and messages[-1].get("role") != "assistant":
        messages.pop()
    return messages[:-1], run.get("tools")


def measure(tmp: Path, name: str, share: float, variant: dict[str, Any]) -> dict[str, Any]:
    """Turn 1 and turn 2 of one source at one window, on a fresh gateway and store."""
    history, tools = source(name)
    tokens = COUNTER.request(history, tools)
    window = int(tokens / share)
    run_dir = tmp / f"{name}-{share}"
    run_dir.mkdir(parents=True)
    with run_simulator(run_dir, record=False, cache=False) as sim:
        model = {"name": "bench", "litellm_model": "openai/gpt-4o-mini", "api_base": sim.base_url}
        config = _merge({"models": [{**model, "context_window": window}]}, variant)
        with run_gateway(run_dir, config) as gw:
            client = openai.OpenAI(base_url=gw.base_url, api_key="sk-bench", max_retries=0, timeout=600)
            cold = _pair(client, f"cold-{name}", history, tools)
            warm = _pair(client, f"warm-{name}", history, tools)
            archived, embedded = _passages(run_dir, f"warm-{name}")
    return {
        "source": name,
        "tokens": tokens,
        "window": window,
        "turn1_s": warm[0],
        "turn2_s": warm[1],
        "turn2_cold_s": cold[1],
        "archived": archived,
        "embedded": embedded,
    }


def _pair(
    client: openai.OpenAI, session_id: str, history: list[dict[str, Any]], tools: list[dict[str, Any]] | None
) -> tuple[float, float]:
    """Wall seconds of the whole history's turn and of the next one, sent as soon as it is answered."""
    extra: dict[str, Any] = {"tools": tools} if tools else {}
    session = {"x-session-id": session_id}
    started = time.perf_counter()
    first = client.chat.completions.create(
        model="bench",
        messages=history,
        max_tokens=32,
        extra_headers=session,
        **extra,  # type: ignore[arg-type]
    )
    turn1 = time.perf_counter() - started
    nxt = [*history, {"role": "assistant", "content": first.choices[0].message.content or ""}]
    nxt.append({"role": "user", "content": QUESTION})
    started = time.perf_counter()
    client.chat.completions.create(
        model="bench",
        messages=nxt,
        max_tokens=32,
        extra_headers=session,
        **extra,  # type: ignore[arg-type]
    )
    return turn1, time.perf_counter() - started


def _passages(run_dir: Path, session_id: str) -> tuple[int, int]:
    """The session's passages archived and those with a vector, from the gateway's SQLite store."""
    found = [p for p in run_dir.rglob("*.db") if p.stat().st_size]
    for path in found:
        with sqlite3.connect(path) as conn:
            try:
                total, with_vector = conn.execute(
                    "select count(*), count(vector) from memory_passages where session_id like ?", (f"%{session_id}",)
                ).fetchone()
            except sqlite3.OperationalError:
                continue
        return int(total), int(with_vector)
    return 0, 0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sources", default=",".join(SOURCES))
    parser.add_argument("--shares", default="0.8,1.6", help="history tokens / window, one run per value")
    parser.add_argument("--runs", type=int, default=1, help="runs per cell (medians)")
    parser.add_argument(
        "--variant", default="", help="config keys for the gateway, e.g. policy.memory.embed_per_archive=8"
    )
    args = parser.parse_args()
    variant = variant_config(args.variant)
    print(
        "| source | history tokens | window | turn 1 s | turn 2 s | turn 2 s, first of the process | "
        "passages archived | with vectors after turn 2 |"
    )
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    out = []
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.sources.split(","):
            for share in (float(s) for s in args.shares.split(",")):
                cells = [measure(Path(tmp) / f"r{k}", name, share, variant) for k in range(args.runs)]
                row = cells[0] | {
                    "turn1_s": statistics.median(c["turn1_s"] for c in cells),
                    "turn2_s": statistics.median(c["turn2_s"] for c in cells),
                    "turn2_cold_s": statistics.median(c["turn2_cold_s"] for c in cells),
                }
                out.append(row)
                print(
                    f"| {name} | {row['tokens']} | {row['window']} | {row['turn1_s']:.2f} | {row['turn2_s']:.2f} | "
                    f"{row['turn2_cold_s']:.2f} | "
                    f"{row['archived']} | {row['embedded']} |",
                    flush=True,
                )
    path = Path(__file__).parent / "out" / f"archive-wait-{time.strftime('%Y%m%d-%H%M%S')}.json"
    path.parent.mkdir(exist_ok=True)
    path.write_bytes(orjson.dumps({"variant": variant, "rows": out}, option=orjson.OPT_INDENT_2))
    print(f"raw numbers: {path}")


if __name__ == "__main__":
    main()
