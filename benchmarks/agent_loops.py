"""Replay real agent loops turn by turn through ``ventana serve`` at a window that forces compaction.

    python -m benchmarks.agent_loops                 # 3 longest runs per file, extractive and LLM
    python -m benchmarks.agent_loops --runs 1 --summarizer extractive
    python -m benchmarks.agent_loops --fit --runs 1 --summarizer llm   # issue 34: small windows, one row each

``--fit`` (issue 34) replays each file at windows where its newest four rounds alone exceed a
quarter of the window (mini-swe-agent at 8K and 6K; tau2's head alone is 6-10K, so 16K is its
smallest window), plus a generated coding loop (45 reads of 1-4K tokens, ``generated_coding_loop``)
at 16K and 8K, and adds per row: the newest tool result verbatim whenever it is under a quarter of
the window, the turns whose newest four rounds went out as the client sent them (kept rounds
verbatim), summariser input over the loop's own input (the client's requests), and the provider
input cost through Ventana (every upstream call, the summariser's included, at gpt-4o-mini's
input and cached-input prices, cached tokens as the simulator's OpenAI prefix cache counts them)
over the cost of sending the client's own requests directly.

Each file of ``shared/data/agent_loops/`` (and the scripted agent's 200-turn session of
``benchmarks.scripted_agent``, at 8K) is replayed as its agent saw it: one request
before every assistant message, with the history up to there and the run's tools, in
one session per run, through a real gateway to the provider simulator (``--record``).
The numbers come from what the simulator received and answered, per file:

- refused: requests the gateway answered with an error; over window: forwarded bodies
  whose tools + messages exceed the window;
- unpaired: forwarded bodies with a tool call lacking its result or a result its call;
- newest verbatim: turns whose newest ``keep_recent_rounds`` rounds went out byte for byte;
- cache: turns with cached tokens > 0 (after each run's first) and their median cached share;
- rewrites: turns whose body does not extend the previous one (a compaction or a clearing
  batch: the provider's cache restarts there), against the bound the issue sets: one per
  ``(threshold - target) x window`` of growth;
- facts kept: of the paths, ids and error lines in the rounds the final request no longer
  carries verbatim, the share still present in it (in a summary or a stub).
"""

from __future__ import annotations

import argparse
import random
import re
import statistics
import tempfile
from collections.abc import Iterator
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import openai
import orjson
from tqdm import tqdm

import gateway  # noqa: F401  (offline tiktoken)
from benchmarks.scripted_agent import TOOLS, scripted_turns
from gateway.assembly.compaction_policy import DEFAULT_TARGET, DEFAULT_THRESHOLD
from gateway.assembly.verify_assembly import is_gateway_block, tool_pairing_problems
from gateway.providersim.cache import PrefixCache, prompt_token_ids
from gateway.providersim.completion import is_summary_request
from gateway.summarize.facts import extract_facts
from gateway.tokens import counter_for
from tests.procs import SimHandle, run_gateway, run_simulator
from tests.shared_data import data_path, need

COUNTER = counter_for("o200k_base")
#: The default watermarks (``--target`` sets another target, e.g. the issue's example 0.35).
THRESHOLD, TARGET = DEFAULT_THRESHOLD, DEFAULT_TARGET
KEEP_ROUNDS = 4
#: Window per file: small enough that each long run must compact. tau2's head alone (system
#: prompt + tool definitions) is 6-10K tokens, so 8K cannot hold it; 16K forces its long runs to compact.
#: The peer-style long session of ``benchmarks.scripted_agent`` (200 turns, one tool round each).
SCRIPTED = "scripted_agent"
#: A generated coding loop (issue 34): 45 reads whose results are 1-4K tokens.
GENERATED = "generated_coding_loop"
#: ``--fit``: (file, window) rows where the newest four rounds exceed a quarter of the window.
FIT_ROWS = [
    (GENERATED, 16_384),
    (GENERATED, 8_192),
    ("mini_swe_agent_deepseek.jsonl", 8_000),
    ("mini_swe_agent_deepseek.jsonl", 6_000),
    ("tau2_telecom_solo.jsonl", 16_000),
    ("tau2_telecom_default.jsonl", 16_000),
    ("tau2_telecom_default.jsonl", 8_000),  # its head is 6.7K: the threshold rises past 80 % (session 36)
    (SCRIPTED, 8_000),
]
#: gpt-4o-mini's input and cached-input prices, dollars per token (litellm's bundled map).
PRICE_INPUT, PRICE_CACHED = 0.15e-6, 0.075e-6
WINDOWS = {
    "mini_swe_agent_deepseek.jsonl": 16_000,
    "tau2_telecom_solo.jsonl": 16_000,
    "tau2_telecom_default.jsonl": 16_000,
    SCRIPTED: 8_000,
}
_ERROR = re.compile(r"\b\w*(?:Error|Exception)\b:?[^\n]{0,60}")


@dataclass
class FileStats:
    requests: int = 0
    refused: int = 0
    over_window: int = 0
    unpaired: int = 0
    newest_verbatim: int = 0
    hits: int = 0
    hit_turns: int = 0
    shares: list[float] = field(default_factory=list)
    rewrites: int = 0
    recall_drops: int = 0  # of the rewrites: a question's <recalled> block left out once the next question came
    rewrite_bound: float = 0.0
    facts: int = 0
    facts_kept: int = 0
    summarizer_calls: int = 0
    newest_small: int = 0  # turns whose newest tool result is under a quarter of the window
    newest_small_verbatim: int = 0  # ... and went out verbatim
    summarizer_input: int = 0  # prompt tokens of the summariser's calls
    loop_input: int = 0  # prompt tokens of the client's own requests
    cost_ventana: float = 0.0
    cost_direct: float = 0.0
    errors: list[str] = field(default_factory=list)


def scripted_run() -> dict[str, Any]:
    """The scripted agent's session as one run: each turn answered with a fixed assistant line."""
    steps, _ = scripted_turns(turns=200, facts=40)
    messages: list[dict[str, Any]] = []
    for step in steps:
        messages += [*step, {"role": "assistant", "content": "Noted, moving on to the next item."}]
    return {"id": SCRIPTED, "tools": TOOLS, "messages": messages}


def generated_run(rounds: int = 45, seed: int = 1) -> dict[str, Any]:
    """A coding agent reading files: one task, ``rounds`` reads of 1-4K tokens each (seeded)."""
    rnd = random.Random(seed)
    words = "def parse line value return self assert import module error index path token buffer".split()  # noqa: SIM905
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "You are a coding agent working in /repo. Use the tools."},
        {"role": "user", "content": "Task: make tests/test_dates.py pass; the parser rejects 2026-02-29."},
    ]
    for k in range(rounds):
        call = {
            "id": f"call_{k}",
            "type": "function",
            "function": {"name": "read_file", "arguments": f'{{"path": "/repo/src/m{k}.py"}}'},
        }
        messages.append({"role": "assistant", "content": f"Step {k}: reading m{k}.py.", "tool_calls": [call]})
        size, lines = rnd.randint(1000, 4000), [f"# /repo/src/m{k}.py OBJ-{k:04d}"]
        while COUNTER.text("\n".join(lines)) < size:
            lines.append(" ".join(rnd.choice(words) for _ in range(12)) + f" {rnd.randint(0, 999)}")
        messages.append({"role": "tool", "tool_call_id": f"call_{k}", "content": "\n".join(lines)})
    messages.append({"role": "assistant", "content": "The parser now accepts leap days."})
    tool = {
        "type": "function",
        "function": {
            "name": "read_file",
            "description": "Read a file",
            "parameters": {"type": "object", "properties": {"path": {"type": "string"}}},
        },
    }
    return {"id": GENERATED, "tools": [tool], "messages": messages}


def load_runs(name: str, runs: int) -> list[dict[str, Any]]:
    """The ``runs`` runs with the most tool rounds (the ones a window forces to compact)."""
    if name == SCRIPTED:
        return [scripted_run()]
    if name == GENERATED:
        return [generated_run()]
    lines = need(data_path("agent_loops", name)).read_bytes().splitlines()
    rows = [orjson.loads(line) for line in lines if line.strip()]
    rows.sort(key=lambda r: -sum(1 for m in r["messages"] if m.get("role") == "assistant"))
    return rows[:runs]


def _clean(message: dict[str, Any]) -> dict[str, Any]:
    """The message as an OpenAI client sends it (reasoning text is not sent back)."""
    return {k: v for k, v in message.items() if k != "reasoning_content"}


def turns(messages: list[dict[str, Any]]) -> Iterator[list[dict[str, Any]]]:
    """The history before each assistant message: what the agent sent to get that message."""
    for i, m in enumerate(messages):
        if m.get("role") == "assistant" and i > 0:
            yield [_clean(x) for x in messages[:i]]


def newest(history: list[dict[str, Any]], n: int) -> list[dict[str, Any]]:
    """The newest ``n`` rounds (from the last user message while there are no more rounds than that).

    A leading system prompt is left out: ``move_volatile`` may rightly move its per-turn values.
    """
    starts = [i for i, m in enumerate(history) if m.get("role") == "assistant"]
    if len(starts) > n:
        return history[starts[-n] :]
    users = [i for i, m in enumerate(history) if m.get("role") == "user"]
    start = users[-1] if users else 0
    while start < len(history) and history[start].get("role") in ("system", "developer"):
        start += 1
    return history[start:]


def _without_gateway_tail(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    end = len(messages)
    while end and is_gateway_block(messages[end - 1]) and messages[end - 1].get("role") != "tool":
        end -= 1
    return messages[:end]


def fact_strings(messages: list[dict[str, Any]]) -> set[str]:
    """Paths, ids and error lines of ``messages`` (not bare numbers: too many, too ambiguous)."""
    out: set[str] = set()
    for m in messages:
        text = str(m.get("content") or "") + " ".join(
            str(c.get("function", {}).get("arguments", "")) for c in m.get("tool_calls") or ()
        )
        for f in extract_facts(text):
            if "/" in f or (any(c.isalpha() for c in f) and any(c.isdigit() for c in f) and len(f) >= 4):
                out.add(f)
        out.update(e.group(0).strip()[:60] for e in _ERROR.finditer(text))
    return out


def _config(sim: SimHandle, summarizer: str) -> dict[str, Any]:
    models = [
        {"name": f"loop-{w}", "litellm_model": "openai/gpt-4o-mini", "api_base": sim.base_url, "context_window": w}
        for w in sorted(set(WINDOWS.values()) | {w for _, w in FIT_ROWS})
    ]
    models.append({"name": "summarizer", "litellm_model": "openai/gpt-4o-mini", "api_base": sim.base_url})
    compaction: dict[str, Any] = {"threshold": THRESHOLD, "target": TARGET, "keep_recent_rounds": KEEP_ROUNDS}
    if summarizer == "llm":
        compaction["summarizer_model"] = "summarizer"
    return {"models": models, "policy": {"compaction": compaction}}


def replay_run(
    client: openai.OpenAI, sim: SimHandle, run: dict[str, Any], window: int, stats: FileStats, bar: Any
) -> None:
    sim.reset()
    histories = list(turns(run["messages"]))
    answers: list[Any] = []
    for k, history in enumerate(histories):
        try:
            answers.append(
                client.chat.completions.create(
                    model=f"loop-{window}",
                    messages=history,  # type: ignore[arg-type]
                    tools=run["tools"],
                    extra_headers={"x-session-id": f"{run['id']}-{window}"},
                )
            )
        except openai.APIStatusError as exc:
            stats.refused += 1
            answers.append(None)
            if len(stats.errors) < 3:
                stats.errors.append(f"turn {k}: {exc.status_code} {str(exc.message)[:160]}")
        bar.update(1)
    received = sim.received()
    chats = [b for b in received if not is_summary_request(b["messages"])]
    stats.summarizer_calls += len(received) - len(chats)
    stats.requests += len(histories)
    _costs(histories, run["tools"], received, stats)
    _score(histories, answers, chats, window, stats)


def _recall_dropped(stable: list[dict[str, Any]], sent: list[dict[str, Any]]) -> bool:
    """Whether ``sent`` differs from ``stable`` only in leaving out the ``<recalled>`` block that stood
    before an earlier question: a rewrite of the last turns, not a compaction (the block is given to the
    question it was chosen for; the next question gets its own)."""
    i = next((i for i, (a, b) in enumerate(zip(stable, sent, strict=False)) if a != b), min(len(stable), len(sent)))
    dropped = i < len(stable) and is_gateway_block(stable[i]) and str(stable[i].get("content")).startswith("<recalled")
    return dropped and sent[i : i + len(stable) - i - 1] == stable[i + 1 :]


def input_cost(bodies: list[tuple[list[dict[str, Any]], Any]]) -> tuple[float, int]:
    """Input cost of ``bodies`` sent in order to one OpenAI-style prefix cache, and their prompt tokens."""
    cache, cost, tokens = PrefixCache(), 0.0, 0
    for messages, tools in bodies:
        ids = prompt_token_ids(COUNTER, messages, tools)
        cached = cache.lookup_and_store(ids)
        cost += (len(ids) - cached) * PRICE_INPUT + cached * PRICE_CACHED
        tokens += len(ids)
    return cost, tokens


def _costs(histories: list[Any], tools: Any, received: list[dict[str, Any]], s: FileStats) -> None:
    """Through Ventana (every upstream call, summariser included) and direct (the client's own requests)."""
    through, _ = input_cost([(b["messages"], b.get("tools")) for b in received])
    direct, loop_tokens = input_cost([(h, tools) for h in histories])
    summaries = [b for b in received if is_summary_request(b["messages"])]
    s.summarizer_input += sum(COUNTER.request(b["messages"], b.get("tools")) for b in summaries)
    s.loop_input += loop_tokens
    s.cost_ventana += through
    s.cost_direct += direct


def _score(histories: list[Any], answers: list[Any], chats: list[dict[str, Any]], window: int, s: FileStats) -> None:
    sent_for = iter(chats)
    previous: list[dict[str, Any]] | None = None
    for k, (history, answer) in enumerate(zip(histories, answers, strict=True)):
        if answer is None:
            previous = None
            continue
        body = next(sent_for)
        sent = body["messages"]
        s.over_window += COUNTER.request(sent, body.get("tools")) > window
        s.unpaired += bool(tool_pairing_problems(sent))
        last_result = history[-1] if history and history[-1].get("role") == "tool" else None
        if last_result is not None and COUNTER.message(last_result) < window // 4:
            s.newest_small += 1
            s.newest_small_verbatim += last_result in sent
        want = newest(history, KEEP_ROUNDS)
        s.newest_verbatim += not want or _without_gateway_tail(sent)[-len(want) :] == want
        details = answer.usage.prompt_tokens_details if answer.usage else None
        cached = (details.cached_tokens or 0) if details else 0
        if k > 0:
            s.hit_turns += 1
            s.hits += cached > 0
            s.shares.append(cached / max(1, answer.usage.prompt_tokens))
        stable = _without_gateway_tail(previous) if previous is not None else None
        if stable is not None and sent[: len(stable)] != stable:
            s.rewrites += 1
            s.recall_drops += _recall_dropped(stable, sent)
        previous = sent
    growth = COUNTER.messages(histories[-1]) - COUNTER.messages(histories[0])
    s.rewrite_bound += max(0.0, growth / ((THRESHOLD - TARGET) * window))
    final_history, final_sent = histories[-1], previous
    if final_sent is not None:
        verbatim = [m for m in final_history if m in final_sent]
        gone = [m for m in final_history if m not in verbatim and m.get("role") not in ("system", "developer")]
        facts = fact_strings(gone)
        text = orjson.dumps(final_sent).decode()
        s.facts += len(facts)
        s.facts_kept += sum(1 for f in facts if orjson.dumps(f).decode()[1:-1] in text)


FIT_HEADER = (
    "| file | window | summariser | requests | refused | over window | unpaired "
    "| newest result verbatim (< 1/4 window) | kept rounds verbatim "
    "| rewrites (bound) | summariser calls | summariser input / loop input | cost via Ventana / direct |\n"
    "|---|---|---|---|---|---|---|---|---|---|---|---|---|"
)


def _rewrites(s: FileStats) -> str:
    """Rewrites against the bound, the compactions apart from the recalled blocks left out."""
    if not s.recall_drops:
        return f"{s.rewrites} (bound {s.rewrite_bound:.1f})"
    compactions = s.rewrites - s.recall_drops
    dropped = f"{s.recall_drops} recalled blocks left out"
    return f"{s.rewrites}: {compactions} compactions (bound {s.rewrite_bound:.1f}) + {dropped}"


def fit_row(name: str, window: int, mode: str, s: FileStats) -> str:
    return (
        f"| `{name}` | {window} | {mode} | {s.requests} | {s.refused} | {s.over_window} | {s.unpaired} | "
        f"{s.newest_small_verbatim}/{s.newest_small} | {s.newest_verbatim}/{s.requests} | {_rewrites(s)} | "
        f"{s.summarizer_calls} | {s.summarizer_input / max(1, s.loop_input):.3f} | "
        f"{s.cost_ventana / max(1e-12, s.cost_direct):.3f} (${s.cost_ventana:.4f} / ${s.cost_direct:.4f}) |"
    )


def row(name: str, mode: str, runs: int, s: FileStats) -> str:
    median = statistics.median(s.shares) if s.shares else 0.0
    hit = s.hits / max(1, s.hit_turns)
    facts = f"{s.facts_kept}/{s.facts} ({s.facts_kept / max(1, s.facts):.0%})"
    return (
        f"| `{name}` | {mode} | {runs} | {WINDOWS[name] // 1000}K | {s.requests} | {s.refused} | {s.over_window} | "
        f"{s.unpaired} | {s.newest_verbatim}/{s.requests} | {hit:.2f} | {median:.2f} | {_rewrites(s)} "
        f"| {s.summarizer_calls} | {facts} |"
    )


HEADER = (
    "| file | summariser | runs | window | requests | refused | over window | unpaired | newest rounds verbatim "
    "| turns with cache hit | median cached share | rewrites (bound) | summariser calls "
    "| facts of compacted rounds kept |\n"
    "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"
)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=3, help="longest runs replayed per file")
    parser.add_argument("--files", nargs="*", default=list(WINDOWS), help="files of shared/data/agent_loops")
    parser.add_argument("--summarizer", choices=["extractive", "llm", "both"], default="both")
    parser.add_argument("--window", type=int, default=None, help="one context window for every file")
    parser.add_argument("--target", type=float, default=DEFAULT_TARGET, help="policy.compaction.target")
    parser.add_argument("--fit", action="store_true", help="issue 34's rows: small windows, one per file and window")
    args = parser.parse_args()
    if args.fit:
        fit_main(args)
        return
    global TARGET
    TARGET = args.target
    if args.window:
        WINDOWS.update(dict.fromkeys(WINDOWS, args.window))
    modes = ["extractive", "llm"] if args.summarizer == "both" else [args.summarizer]
    work = [(name, mode, load_runs(name, args.runs)) for mode in modes for name in args.files]
    total = sum(sum(1 for _ in turns(r["messages"])) for _, _, runs in work for r in runs)
    lines = []
    with ExitStack() as stack, tqdm(total=total, unit="turn") as bar:
        tmp = Path(stack.enter_context(tempfile.TemporaryDirectory()))
        sim = stack.enter_context(run_simulator(tmp))
        for mode in modes:
            # Each mode its own directory, so its own database: sharing one, the LLM run recalled the
            # extractive run's archive of the same sessions, which it never produced itself.
            (tmp / mode).mkdir()
            with run_gateway(tmp / mode, _config(sim, mode)) as gw:
                client = openai.OpenAI(base_url=gw.base_url, api_key="sk-bench", max_retries=0, timeout=120)
                for name, file_mode, runs in work:
                    if file_mode != mode:
                        continue
                    stats = FileStats()
                    for run in runs:
                        replay_run(client, sim, run, WINDOWS[name], stats, bar)
                    lines.append(row(name, mode, len(runs), stats))
                    for e in stats.errors:
                        lines.append(f"<!-- {name} {mode}: {e} -->")
    print(HEADER)
    print("\n".join(lines))


def fit_main(args: argparse.Namespace) -> None:
    """Issue 34: each (file, window) of ``FIT_ROWS`` (``--files`` narrows them) through one gateway."""
    modes = ["extractive", "llm"] if args.summarizer == "both" else [args.summarizer]
    rows = [(n, w) for n, w in FIT_ROWS if not args.files or n in args.files or args.files == list(WINDOWS)]
    work = [(n, w, load_runs(n, args.runs)) for n, w in rows]
    total = len(modes) * sum(sum(1 for _ in turns(r["messages"])) for _, _, runs in work for r in runs)
    lines = []
    with ExitStack() as stack, tqdm(total=total, unit="turn") as bar:
        tmp = Path(stack.enter_context(tempfile.TemporaryDirectory()))
        sim = stack.enter_context(run_simulator(tmp))
        for mode in modes:
            (tmp / mode).mkdir()
            with run_gateway(tmp / mode, _config(sim, mode)) as gw:
                client = openai.OpenAI(base_url=gw.base_url, api_key="sk-bench", max_retries=0, timeout=300)
                for name, window, runs in work:
                    stats = FileStats()
                    for run in runs:
                        replay_run(client, sim, {**run, "id": f"{run['id']}-{mode}"}, window, stats, bar)
                    lines.append(fit_row(name, window, mode, stats))
                    lines += [f"<!-- {name} {window} {mode}: {e} -->" for e in stats.errors]
    print(FIT_HEADER)
    print("\n".join(lines))


if __name__ == "__main__":
    main()
