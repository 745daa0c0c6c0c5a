"""What prefix tracking and metrics cost per request, against the token count every request already pays.

    python -m benchmarks.metrics_overhead [--rounds 5]

Replays public conversations turn by turn, the way agents resend their history (ToolBench
runs with their tools, BFCL memory conversations of 24-109 messages), and times three things
per request, in the same process and run:

- baseline: ``ctx.prompt_tokens()``, the count ``api/chat.py`` already makes for every request;
- ``track_prefix(ctx)``: block split, digests and the comparison with the previous turn;
- ``metrics.observe(record)``: every counter and histogram one request updates, with five decisions.

Reports medians in microseconds and the ratio of each to the baseline.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Iterator
from dataclasses import replace
from typing import Any

from tqdm import tqdm

from gateway import metrics
from gateway.assembly.context import Context, Env, SessionState
from gateway.assembly.prefix import track_prefix
from gateway.memos import Memos
from gateway.store.record import RequestRecord
from gateway.tokens import counter_for
from gateway.upstream.usage import Usage
from tests.shared_data import data_rows

COUNTER = counter_for("o200k_base")
MEMOS = Memos()  # the gateway's caches between requests (api.deps.Gateway.memos)
DECISIONS = [
    {"pass": "move_volatile", "action": "moved", "tokens_before": 40, "tokens_after": 0, "detail": {"spans": []}},
    {
        "pass": "prune_tools",
        "action": "pruned",
        "tokens_before": 900,
        "tokens_after": 300,
        "detail": {"removed": ["a"]},
    },
    {"pass": "compact_history", "action": "checkpoint_reused", "tokens_before": 0, "tokens_after": 0, "detail": {}},
    {"pass": "render_reminder", "action": "rendered", "tokens_before": 0, "tokens_after": 45, "detail": {}},
    {"pass": "lint_context", "action": "finding", "detail": {"check": "critical_rule_edges", "severity": "warning"}},
]


def _data(name: str) -> list[dict[str, Any]]:
    return data_rows(name)


def _turns() -> Iterator[tuple[str, list[dict[str, Any]], list[dict[str, Any]] | None]]:
    """(session, messages, tools) for every user turn of every conversation, in order."""
    for run in _data("toolbench.jsonl"):
        for cut in range(2, len(run["messages"]) + 1):
            yield run["id"], run["messages"][:cut], run["tools"]
    for conv in _data("bfcl_memory.jsonl"):
        msgs = conv["messages"]
        for cut in range(1, len(msgs) + 1, 2):
            yield conv["id"], msgs[:cut], None


def _ctx(messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None, state: SessionState) -> Context:
    env = Env(counter=COUNTER, context_window=128_000, model="gpt-4o-mini", memos=MEMOS)
    return Context(messages=tuple(messages), tools=tuple(tools) if tools else None, params={}, env=env, session=state)


def _record(tokens: int) -> RequestRecord:
    return RequestRecord.of(
        request_id="r",
        session_id="s",
        created_at=0.0,
        model="bench-model",
        provider="openai",
        caller="c",
        original={},
        assembled={},
        decisions=DECISIONS,
        usage=Usage(prompt_tokens=tokens, cached_tokens=tokens // 2),
        tokens_original=tokens,
        tokens_assembled=tokens,
        total_ms=3.0,
        overhead_ms=0.4,
        ttfb_ms=2.0,
        predicted_cached_tokens=tokens // 2,
    )


def _round(turns: list[tuple[str, list[dict[str, Any]], list[dict[str, Any]] | None]]) -> dict[str, list[float]]:
    times: dict[str, list[float]] = {"baseline": [], "track_prefix": [], "observe": []}
    states: dict[str, SessionState] = {}
    for session, messages, tools in turns:
        state = states.get(session) or SessionState(session_id=session)
        ctx = _ctx(messages, tools, state)
        t0 = time.perf_counter()
        tokens = ctx.prompt_tokens()
        t1 = time.perf_counter()
        report = track_prefix(ctx)
        t2 = time.perf_counter()
        record = _record(tokens)
        record.prefix_break = report.break_component
        record.component_tokens = report.component_tokens()
        t3 = time.perf_counter()
        metrics.observe(record)
        t4 = time.perf_counter()
        states[session] = replace(state, previous_prefix=report.keys())
        times["baseline"].append((t1 - t0) * 1e6)
        times["track_prefix"].append((t2 - t1) * 1e6)
        times["observe"].append((t4 - t3) * 1e6)
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    turns = list(_turns())
    _round(turns)  # warm the token memo, as a running gateway's is
    merged: dict[str, list[float]] = {"baseline": [], "track_prefix": [], "observe": []}
    for _ in tqdm(range(args.rounds), desc="rounds"):
        for name, values in _round(turns).items():
            merged[name].extend(values)
    base = statistics.median(merged["baseline"])
    print(f"{len(turns)} requests x {args.rounds} rounds, median microseconds per request")
    for name, values in merged.items():
        med, p95 = statistics.median(values), statistics.quantiles(values, n=20)[-1]
        print(f"  {name:13s} median {med:8.1f} us   p95 {p95:8.1f} us   ratio to baseline {med / base:5.2f}")


if __name__ == "__main__":
    main()
