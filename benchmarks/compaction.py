"""Benchmark history compaction: bounded prompts, facts kept, summariser calls, cache hits, latency.

    python -m benchmarks.compaction            # full run (200 turns, 40 facts, bfcl_memory, latency)
    python -m benchmarks.compaction --quick    # smaller, for a smoke check

Parts 1 and 2 run the assembly pipeline in process, turn after turn with the session
state carried like the API carries it, and forward every assembled body to a real
provider-simulator process over HTTP (its answers become the next turn's assistant
message, its ``cached_tokens`` are the cache numbers). The LLM summariser posts to the
simulator too. Part 3 runs the real gateway process and measures, from the client, the
latency of the turns that cross the threshold with and without summaries prepared ahead.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import httpx
import orjson
from tqdm import tqdm

import gateway  # noqa: F401  (offline tiktoken)
from benchmarks.scripted_agent import TOOLS, facts_present, final_question, scripted_turns
from gateway.assembly.compaction_policy import CompactionPolicy
from gateway.assembly.context import Context, Env, SessionState, Summarizer
from gateway.assembly.pipeline import assemble
from gateway.assembly.policy import Policy
from gateway.config import ModelConfig
from gateway.summarize.llm import LLMSummarizer
from gateway.tokens import counter_for
from tests.shared_data import data_path, need

WINDOW = 8000
#: What the client appends as the assistant's reply each turn: the simulator's answer
#: ("Simulated answer <8 hex digits> to: <echo>", one incidental id per turn) or a fixed line.
REPLIES = "scripted"
SCRIPTED_REPLY = "Checked that item and updated the offsite plan; nothing else changed."
COUNTER = counter_for("o200k_base")


def _memory_data() -> Path:
    return need(data_path("bfcl_memory.jsonl"))


@dataclass
class Run:
    prompt_tokens: list[int] = field(default_factory=list)
    cached_tokens: list[int] = field(default_factory=list)
    turn_tokens: list[int] = field(default_factory=list)  # tokens each turn added to the client history
    compactions: int = 0
    reuses: int = 0
    summarizer_calls: int = 0
    fallbacks: int = 0
    final_messages: list[dict[str, Any]] = field(default_factory=list)


def drive(
    steps: list[list[dict[str, Any]]],
    policy: Policy,
    sim_url: str,
    summarizer: Summarizer | None,
    tools: list[dict[str, Any]] | None,
    label: str,
) -> Run:
    """Play the client: send the growing history each turn, record what the provider saw."""
    run, state, history = Run(), SessionState(session_id="bench"), []
    env = Env(counter=COUNTER, context_window=WINDOW, model="small-window", summarizer=summarizer)
    with httpx.Client(timeout=60) as client:
        for step in tqdm(steps, desc=label, leave=False):
            before = COUNTER.messages(history)
            history += step
            ctx = Context(tuple(history), tuple(tools) if tools else None, {"model": "gpt-4o-mini"}, env, state)
            result = assemble(ctx, policy)
            state = replace(result.assembled.session, turn=state.turn + 1)
            for d in result.decisions:
                run.compactions += d.action == "compacted"
                run.reuses += d.action == "checkpoint_reused"
                run.fallbacks += d.action == "summarizer_failed"
                run.summarizer_calls += int(d.detail.get("summarizer_calls", 0)) if d.action == "compacted" else 0
            body = result.assembled.body()
            data = client.post(f"{sim_url}/chat/completions", content=orjson.dumps(body)).json()
            run.prompt_tokens.append(data["usage"]["prompt_tokens"])
            run.cached_tokens.append(data["usage"]["prompt_tokens_details"]["cached_tokens"])
            run.final_messages = body["messages"]
            answer = data["choices"][0]["message"]["content"]
            history.append({"role": "assistant", "content": answer if REPLIES == "sim" else SCRIPTED_REPLY})
            run.turn_tokens.append(COUNTER.messages(history) - before)
    return run


def _policy(**compaction: Any) -> Policy:
    return Policy(compaction=CompactionPolicy(**compaction))


def _llm(sim_url: str) -> LLMSummarizer:
    model = ModelConfig(name="gpt-4o-mini", litellm_model="openai/gpt-4o-mini", api_base=sim_url)
    return LLMSummarizer(model=model, api_key=None, timeout_s=30)


def _reset(sim_url: str) -> None:
    httpx.post(sim_url.removesuffix("/v1") + "/_sim/reset").raise_for_status()


def scripted(sim_url: str, turns: int, facts: int) -> list[str]:
    steps, planted = scripted_turns(turns=turns, facts=facts)
    steps[-1] = [*steps[-1], final_question(planted)]
    limit = int(CompactionPolicy().threshold * WINDOW)
    rows = [
        "| strategies | summariser | checkpoint reuse | max prompt tokens | max over threshold | largest turn | "
        "compactions | reuses | summariser calls | fallbacks | facts kept | cached tokens (sum) | "
        "turns with cache hit | median cached share |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    variants = [
        (s, n, r)
        for s in ("clear+summarize", "summarize")
        for n, r in (("extractive", True), ("extractive", False), ("llm (provider-sim)", True))
    ]
    for strategies, name, reuse in variants:
        _reset(sim_url)
        summarizer = _llm(sim_url) if name.startswith("llm") else None
        order = ["clear_tool_results", "summarize"] if strategies.startswith("clear") else ["summarize"]
        pol = _policy(reuse_checkpoints=reuse, strategies=order)
        run = drive(steps, pol, sim_url, summarizer, TOOLS, f"{strategies} {name} reuse={reuse}")
        share = [c / p for c, p in zip(run.cached_tokens, run.prompt_tokens, strict=True)]
        rows.append(
            f"| {strategies} | {name} | {'on' if reuse else 'off'} | {max(run.prompt_tokens)} | "
            f"{max(run.prompt_tokens) - limit:+d} | {max(run.turn_tokens)} | {run.compactions} | {run.reuses} | "
            f"{run.summarizer_calls} | {run.fallbacks} | {facts_present(planted, run.final_messages):.0%} | "
            f"{sum(run.cached_tokens)} | {sum(c > 0 for c in run.cached_tokens)}/{len(steps)} | "
            f"{statistics.median(share):.0%} |"
        )
    uncompacted = COUNTER.request([m for s in steps for m in s], TOOLS)
    rows.append(
        f"\n{turns} turns, {facts} planted facts; uncompacted final prompt would be {uncompacted} tokens "
        f"(window {WINDOW}, threshold {limit})."
    )
    return rows


def memory(sim_url: str) -> list[str]:
    rows = [
        "| conversation | history tokens | answers in full history | extractive: kept | compactions | "
        "llm (provider-sim): kept | compactions |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    totals = [0, 0, 0, 0]
    for line in _memory_data().read_text().splitlines():
        case = orjson.loads(line)
        steps = [[m] for m in case["messages"]]
        steps[-1] = [*steps[-1], {"role": "user", "content": case["questions"][0]["question"]}]
        full = "\n".join(str(m["content"]) for m in case["messages"]).lower()
        present = [q for q in case["questions"] if any(a.lower() in full for a in q["answers"])]
        kept: list[str] = []
        for summarizer in (None, _llm(sim_url)):
            _reset(sim_url)
            run = drive(steps, _policy(), sim_url, summarizer, None, case["id"])
            text = "\n".join(str(m.get("content")) for m in run.final_messages).lower()
            hit = sum(any(a.lower() in text for a in q["answers"]) for q in present)
            kept.append(f"{hit}/{len(present)} | {run.compactions}")
            totals[2 if summarizer else 1] += hit
        totals[0] += len(present)
        totals[3] += len(case["questions"])
        rows.append(
            f"| {case['id']} | {COUNTER.messages(case['messages'])} | {len(present)}/{len(case['questions'])} | "
            f"{kept[0]} | {kept[1]} |"
        )
    rows.append(
        f"| **all** | | {totals[0]}/{totals[3]} | {totals[1]}/{totals[0]} ({totals[1] / totals[0]:.0%}) | | "
        f"{totals[2]}/{totals[0]} ({totals[2] / totals[0]:.0%}) | |"
    )
    return rows


def latency(tmp: Path, sessions: int, turns: int, summarizer_latency_ms: float, pause_s: float) -> list[str]:
    """Client-side latency of threshold-crossing turns, with and without summaries prepared ahead."""
    import openai

    from tests.procs import run_gateway, run_simulator, sim_models

    rows = [
        "| mode | crossing turns | median crossing turn (ms) | median other turn (ms) | crossing / other |",
        "| --- | --- | --- | --- | --- |",
    ]
    steps, _ = scripted_turns(turns=turns, facts=10)
    chat_dir, summ_dir = _dir(tmp / "chat"), _dir(tmp / "summ")
    with run_simulator(chat_dir) as chat, run_simulator(summ_dir, latency_ms=summarizer_latency_ms) as slow:
        models = [*sim_models(chat.base_url), {**sim_models(slow.base_url)[0], "name": "summarizer"}]
        for mode, prepare_at in (("prepared ahead (prepare_at 0.45)", 0.45), ("not prepared (prepare_at 0.55)", 0.55)):
            crossing, other = [], []
            config = {
                "models": models,
                "policy": {
                    "compaction": {
                        "summarizer_model": "summarizer",
                        "prepare_at": prepare_at,
                        "strategies": ["summarize"],
                    }
                },
            }
            with run_gateway(_dir(tmp / mode[:3]), config) as gw:
                client = openai.OpenAI(base_url=gw.base_url, api_key="sk-bench")
                for s in range(sessions):
                    chat.reset()
                    history: list[dict[str, Any]] = []
                    took: list[float] = []
                    for step in tqdm(steps, desc=f"{mode[:12]} session {s}", leave=False):
                        history += step
                        started = time.perf_counter()
                        got = client.chat.completions.create(
                            model="small-window",
                            messages=history,
                            tools=TOOLS,
                            extra_headers={"x-session-id": f"lat-{prepare_at}-{s}"},
                        )
                        took.append((time.perf_counter() - started) * 1000)
                        history.append({"role": "assistant", "content": got.choices[0].message.content})
                        time.sleep(pause_s)
                    heads = [_summary_head(b) for b in chat.received()]
                    for i, ms in enumerate(took):
                        (crossing if heads[i] and heads[i] != heads[i - 1] else other).append(ms)
            rows.append(
                f"| {mode} | {len(crossing)} | {statistics.median(crossing):.1f} | {statistics.median(other):.1f} | "
                f"{statistics.median(crossing) / statistics.median(other):.2f} |"
            )
    rows.append(
        f"\nSummariser model answers after {summarizer_latency_ms:.0f} ms; the client pauses {pause_s}s "
        f"between turns; {sessions} sessions x {turns} turns per mode."
    )
    return rows


def _dir(path: Path) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    return path


def _summary_head(body: dict[str, Any]) -> str | None:
    for m in body["messages"]:
        content = str(m.get("content") or "")
        if content.startswith("<summary"):
            return content.split("\n", 1)[0]
    return None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer turns and sessions (smoke check)")
    parser.add_argument(
        "--replies",
        choices=["scripted", "sim"],
        default="scripted",
        help="assistant replies the client keeps: a fixed line, or the simulator's answer (parts 1 and 2)",
    )
    parser.add_argument(
        "--only", default="scripted,memory,latency", help="comma-separated parts: scripted, memory, latency"
    )
    args = parser.parse_args()
    parts = set(args.only.split(","))
    global REPLIES
    REPLIES = args.replies
    turns, facts, sessions = (60, 12, 1) if args.quick else (200, 40, 3)
    from tests.procs import run_simulator

    with tempfile.TemporaryDirectory() as tmp, run_simulator(Path(tmp), record=False) as sim:
        if "scripted" in parts:
            print("\n### Scripted agent conversation\n")
            print("\n".join(scripted(sim.base_url, turns, facts)), flush=True)
        if "memory" in parts:
            print("\n### bfcl_memory: answers still in the assembled context at the last turn\n")
            print("\n".join(memory(sim.base_url)), flush=True)
        if "latency" in parts:
            print("\n### Latency of the turn that crosses the threshold\n")
            print("\n".join(latency(Path(tmp), sessions, 40 if args.quick else 80, 400.0, 0.6)), flush=True)


if __name__ == "__main__":
    main()
