"""Measure what the assembly passes buy and cost: prompt-cache hits, and time per request.

Two measurements, each against a baseline run in the same process:

1. cache: a scripted N-turn conversation whose system prompt embeds the current time
   and a request id (the skill card as the rules, ~2,000 tokens) is assembled with the
   default policy and with every pass off; the provider simulator's prefix cache (OpenAI
   accounting: 1,024-token minimum, 128-token blocks) reports cached tokens per turn.
   Reported: the share of prompt tokens served from cache, with and without the passes.
2. overhead: the median time to assemble a real request (ToolBench runs, BFCL requests)
   with the default policy, against the same requests with every pass off (the
   pipeline's fixed cost), as a ratio and in microseconds; and the median first-sight
   cost, before the per-text pattern scan is memoised (a session's first turn).

Run from the repo root: ``python -m benchmarks.assembly_cache [--turns 30] [--repeat 15]``.
"""

from __future__ import annotations

import argparse
import statistics
import time
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import orjson
from tqdm import tqdm

import gateway  # noqa: F401  (offline tiktoken)
from gateway.assembly.context import Context, Env, SessionState
from gateway.assembly.move_volatile import _pattern_spans
from gateway.assembly.pipeline import assemble
from gateway.assembly.policy import Policy
from gateway.memos import Memos
from gateway.providersim.cache import PrefixCache, prompt_token_ids
from gateway.tokens import counter_for
from tests.shared_data import data_path, need, shared_path

COUNTER = counter_for("o200k_base")
MEMOS = Memos()  # the gateway's caches between requests (api.deps.Gateway.memos)


def _ctx(messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None, state: SessionState) -> Context:
    env = Env(counter=COUNTER, context_window=128_000, model="gpt-4o-mini", memos=MEMOS)
    return Context(
        messages=tuple(messages),
        tools=tuple(tools) if tools else None,
        params={"model": "gpt-4o-mini"},
        env=env,
        session=state,
    )


def cache_run(policy: Policy, turns: int, rules: str) -> tuple[int, int]:
    """(cached tokens, prompt tokens) summed over a conversation with a clock in the system prompt."""
    cache, state = PrefixCache(), SessionState("bench")
    history: list[dict[str, Any]] = []
    cached = total = 0
    start = datetime(2026, 11, 29, 9, 0, tzinfo=UTC)
    for turn in tqdm(range(1, turns + 1), desc="cache " + ("on" if policy.volatile.enabled else "off"), leave=False):
        now = (start + timedelta(minutes=turn)).isoformat(timespec="seconds")
        system = {"role": "system", "content": f"Current time: {now}\nRequest ID: {uuid.uuid4()}\n\n{rules}"}
        history.append({"role": "user", "content": f"Question {turn}: what changed?"})
        result = assemble(_ctx([system, *history], None, state), policy)
        state = result.assembled.session
        ids = prompt_token_ids(COUNTER, result.assembled.messages, None)
        cached += cache.lookup_and_store(ids)
        total += len(ids)
        history.append({"role": "assistant", "content": f"Answer {turn}: the reminder holds the clock."})
    return cached, total


def _requests(limit: int) -> list[dict[str, Any]]:
    rows = [orjson.loads(line) for line in need(data_path("toolbench.jsonl")).read_bytes().splitlines()]
    bfcl = need(data_path("bfcl.jsonl")).read_bytes().splitlines()
    rows += [orjson.loads(line) for line in bfcl[: max(0, limit - len(rows))]]
    out = []
    for row in rows:
        messages = row["messages"][:-1] if row.get("meta", {}).get("last_message_is_ground_truth") else row["messages"]
        out.append({"messages": messages, "tools": row.get("tools")})
    return out


def _cold_median_us(requests: list[dict[str, Any]], policy: Policy) -> float:
    """First sight of each request: the per-text pattern scan is not memoised yet (token counts are)."""
    per_request: list[float] = []
    for request in tqdm(requests, desc="overhead cold", leave=False):
        ctx = _ctx(request["messages"], request["tools"], SessionState("bench"))
        ctx.prompt_tokens()
        _pattern_spans.cache_clear()
        t0 = time.perf_counter()
        assemble(ctx, policy)
        per_request.append(time.perf_counter() - t0)
    return statistics.median(per_request) * 1e6


def _median_us(requests: list[dict[str, Any]], policy: Policy, repeat: int, label: str) -> float:
    per_request: list[float] = []
    for request in tqdm(requests, desc=label, leave=False):
        ctx = _ctx(request["messages"], request["tools"], SessionState("bench"))
        assemble(ctx, policy)  # warm the token cache, as a resent history is in production
        samples = []
        for _ in range(repeat):
            t0 = time.perf_counter()
            assemble(ctx, policy)
            samples.append(time.perf_counter() - t0)
        per_request.append(statistics.median(samples))
    return statistics.median(per_request) * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=30)
    parser.add_argument("--requests", type=int, default=200)
    parser.add_argument("--repeat", type=int, default=15)
    args = parser.parse_args()
    rules = need(shared_path("seeds", "skill-context-window-engineering-es.txt")).read_text(encoding="utf-8")
    on, off = Policy(), Policy().all_disabled()
    cached_on, total_on = cache_run(on, args.turns, rules)
    cached_off, total_off = cache_run(off, args.turns, rules)
    print(f"cache, {args.turns} turns, clock + request id in the system prompt:")
    print(f"  passes on : {cached_on:,} of {total_on:,} prompt tokens cached ({cached_on / total_on:.1%})")
    print(f"  passes off: {cached_off:,} of {total_off:,} prompt tokens cached ({cached_off / total_off:.1%})")
    requests = _requests(args.requests)
    base = _median_us(requests, off, args.repeat, "overhead off")
    full = _median_us(requests, on, args.repeat, "overhead on")
    print(f"overhead, median over {len(requests)} real requests (ToolBench + BFCL), {args.repeat} runs each:")
    cold = _cold_median_us(requests, on)
    print(f"  every pass off: {base:.1f} us   default policy, resent prompt: {full:.1f} us (ratio {full / base:.1f}x)")
    print(f"  default policy, first sight of the prompt (pattern scan not memoised): {cold:.1f} us")


if __name__ == "__main__":
    main()
