"""The ``--fit`` rows of ``benchmarks.agent_loops`` counted in process, for a machine too loaded to serve them.

    python -m benchmarks.agent_loops_inproc generated_coding_loop:16384 mini_swe_agent_deepseek.jsonl:6000

The same replay (the longest run of each file, one request before every assistant message, one session),
through ``assemble`` with the session carried over and each planned summary prepared at once as the API
does in the background (``tests.assembly.compaction_helpers.run_turns``), with the extractive summariser.
Counted from what the pipeline would forward: over window, unpaired, the newest result verbatim whenever
it is under a quarter of the window, and rewrites against the bound of one per
``(threshold - target) x window`` of growth. No cost column: that needs the simulator's cache.

The last column is a second bound, not a replacement of the first: one rewrite per growth of the room a
compaction has behind the head, ``min(band, raised threshold - head - summary ceiling)``. Behind a head
that fills most of the window (tau2's 6.7K system prompt and tools at 8K) no compaction can land a whole
band under the threshold: the head, a summary and the newest round stay. Where the band fits, both agree.

``--sessions`` replays every run of each file instead (``python -m benchmarks.agent_loops_inproc --sessions
tau2_telecom_default.jsonl:8000``) and counts what pruning the tools costs: tool-set changes per session
(the first pruned set after whole lists counts as one) and calls to a tool the request did not offer,
each a ``find_tools`` round and a set change when served, besides the rewrites; and the provider input cost
through the gateway over direct at the model's cache prices (``served_bodies``: each assembled request and
a ``find_tools`` round per call not offered; ``summariser_cost``: what a model summariser would have been
sent for the session's summaries), so pruning for fit is weighed against what its changes cost.
"""

from __future__ import annotations

import argparse
import itertools
from typing import Any

from benchmarks.agent_loops import PRICE_INPUT, TARGET, THRESHOLD, input_cost, load_runs, turns
from gateway.assembly.compaction_layout import SUMMARY_FRAME_TOKENS, for_head, head_tokens, layout, watermarks
from gateway.assembly.compaction_policy import CompactionPolicy, for_window
from gateway.assembly.policy import Policy
from gateway.assembly.verify_assembly import tool_pairing_problems
from tests.assembly.compaction_helpers import COUNTER, make_ctx, rewrites, run_turns


def fit_row(name: str, window: int) -> str:
    run = load_runs(name, 1)[0]
    histories = list(turns(run["messages"]))
    policy = Policy(compaction=CompactionPolicy(threshold=THRESHOLD, target=TARGET, keep_recent_rounds=4))
    results = run_turns(histories, policy, window=window, tools=run["tools"], prepare_ahead=True)
    over = sum(COUNTER.request(r.assembled.messages, r.assembled.tools) > window for r in results)
    unpaired = sum(bool(tool_pairing_problems(r.assembled.messages)) for r in results)
    small = verbatim = 0
    for history, result in zip(histories, results, strict=True):
        if history[-1].get("role") == "tool" and COUNTER.message(history[-1]) < window // 4:
            small += 1
            verbatim += history[-1] in list(result.assembled.messages)
    growth = COUNTER.messages(histories[-1]) - COUNTER.messages(histories[0])
    band = (THRESHOLD - TARGET) * window
    room = min(band, room_behind_head(histories[-1], policy.compaction, window, run["tools"]))
    return (
        f"| `{name}` | {window} | {len(histories)} | {over} | {unpaired} | {verbatim}/{small} | "
        f"{len(rewrites(results))} (bound {growth / band:.1f}) | {growth / room:.1f} ({room:.0f} tokens) |"
    )


def sessions_row(name: str, window: int) -> str:
    """Every run of ``name`` at ``window``: rewrites, tool-set changes and calls to a tool not offered."""
    policy = Policy(compaction=CompactionPolicy(threshold=THRESHOLD, target=TARGET, keep_recent_rounds=4))
    runs = load_runs(name, 10**6)
    rewritten = changes = missed = missing_sessions = pruned = 0
    through = direct = 0.0
    for run in runs:
        histories = list(turns(run["messages"]))
        results = run_turns(histories, policy, window=window, tools=run["tools"], prepare_ahead=True)
        offered = [{t["function"]["name"] for t in r.assembled.tools or ()} for r in results]
        names = [tuple(t["function"]["name"] for t in r.assembled.tools or ()) for r in results]
        changes += sum(a != b for a, b in itertools.pairwise(names))
        pruned += len(names[-1]) != len(run["tools"])
        rewritten += len(rewrites(results))
        calls = [
            c["function"]["name"]
            for k, h in enumerate(histories[:-1])
            for c in histories[k + 1][len(h)].get("tool_calls") or []
            if c["function"]["name"] not in offered[k]
        ]
        missed += len(calls)
        missing_sessions += bool(calls)
        through += input_cost(served_bodies(histories, results, offered))[0] + summariser_cost(histories[-1], results)
        direct += input_cost([(h, run["tools"]) for h in histories])[0]
    return (
        f"| `{name}` | {window} | {len(runs)} | {pruned} | {rewritten} | {changes / len(runs):.2f} | "
        f"{missed} ({missing_sessions} sessions) | {through / direct:.3f} |"
    )


def summariser_cost(messages: list[Any], results: list[Any]) -> float:
    """The input a model summariser would have been sent for the session's summaries, at the uncached price:
    each checkpoint's new span (from where the summary it continues ended) and the summary it continues."""
    seen: dict[str, Any] = {}
    for result in results:
        for checkpoint in result.assembled.session.checkpoints:
            seen.setdefault(checkpoint.range_hash, checkpoint)
    tokens = 0
    done: dict[int, Any] = {}  # by start: the latest summary of a range opening there
    for checkpoint in seen.values():
        previous = done.get(checkpoint.start)
        span_start = previous.end if previous is not None and previous.end <= checkpoint.end else checkpoint.start
        tokens += COUNTER.messages(messages[span_start : checkpoint.end])
        tokens += COUNTER.text(previous.summary) if previous is not None else 0
        done[checkpoint.start] = checkpoint
    return tokens * PRICE_INPUT


def served_bodies(histories: list[Any], results: list[Any], offered: list[set[str]]) -> list[tuple[Any, Any]]:
    """What the provider would receive served, at the model's cache prices: each assembled request, and for a
    call to a tool the request did not offer, the ``find_tools`` round it costs (the same request again with
    the grown set, the next one's tools: the prefix cache lost from the tools on). The summaries are counted
    apart (``summariser_cost``)."""
    bodies: list[tuple[Any, Any]] = []
    for k, result in enumerate(results):
        bodies.append((list(result.assembled.messages), result.assembled.tools))
        if k + 1 < len(results):
            calls = histories[k + 1][len(histories[k])].get("tool_calls") or []
            if any(c["function"]["name"] not in offered[k] for c in calls):
                bodies.append((list(result.assembled.messages), results[k + 1].assembled.tools))
    return bodies


def room_behind_head(history: list[dict[str, Any]], policy: CompactionPolicy, window: int, tools: Any) -> float:
    """What a compaction can free at most on ``history``: the (raised) threshold less the head and a summary
    at its ceiling (the newest round, which also stays, is not counted: the bound stays generous)."""
    ctx = make_ctx(history, window=window, tools=tools)
    policy = for_window(policy, window)
    lay = layout(ctx.messages, policy, COUNTER)
    if lay is None:
        return float(window)
    summary = for_head(ctx, lay, policy).summary_max_tokens + SUMMARY_FRAME_TOKENS
    return float(watermarks(ctx, lay, policy).threshold - head_tokens(ctx, lay, policy) - summary)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("rows", nargs="+", help="file:window, e.g. mini_swe_agent_deepseek.jsonl:6000")
    parser.add_argument("--sessions", action="store_true", help="every run of each file: tool-set changes")
    args = parser.parse_args()
    if args.sessions:
        print(
            "| file | window | sessions | tools pruned | rewrites | tool-set changes / session | calls not offered "
            "| input cost via Ventana / direct |"
        )
        print("|---|---|---|---|---|---|---|---|")
        for spec in args.rows:
            name, window = spec.rsplit(":", 1)
            print(sessions_row(name, int(window)), flush=True)
        return
    print(
        "| file | window | requests | over window | unpaired | newest result verbatim (< 1/4 window) "
        "| rewrites (bound) | bound behind the head (room) |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for spec in args.rows:
        name, window = spec.rsplit(":", 1)
        print(fit_row(name, int(window)), flush=True)


if __name__ == "__main__":
    main()
