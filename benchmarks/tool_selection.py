"""Benchmark tool selection the way agents use it: real transcripts replayed through ``ventana serve``.

Run from the repo root: ``python -m benchmarks.tool_selection`` (``--runs N`` sessions per
file, ``--max-steps N`` client requests per session). For each data file, each sampled
transcript is replayed turn by turn: every assistant message of the transcript is one
client request (the messages before it, and the file's tools) sent to a served gateway,
whose upstream (``benchmarks.replay_upstream``) plays that real next message, calling
``find_tools`` first when a tool it calls is not offered but ``find_tools`` is. The same
requests go through two gateways: the default policy, and tool pruning off ("send all").

Per file, one row per arm:
- could call: share of the transcript's real tool calls whose tool was offered in the last
  upstream request of their client request (directly or after ``find_tools``);
- tool tokens / request: tool-definition tokens over every upstream request (an expansion's
  calls included) per client request, and how many fewer than sending all;
- upstream tokens and cost: all prompt and completion tokens sent upstream, and their cost at
  the model's prices with an exact-prefix cache (``providersim.cache.PrefixCache``), over
  sending all;
- set changes / session: how often the forwarded tool list changed within a session (each
  change breaks the prefix cache from the tools on); the first list is not a change;
- searches / session, and the median added latency (client-measured, requests without a search,
  against the same requests sent with pruning off).

Files: ``agent_loops/tau2_telecom_{solo,default}.jsonl``, ``toolbench.jsonl``, and two mixes
with 30-60 tools: tau2 default runs with a ToolBench run's tools and BFCL functions as
distractors (``mix_tau2``), and ToolBench runs with tau2's agent tools and BFCL functions
(``mix_toolbench``). Distractors are placed at seeded random positions.

With ``--bfcl-multi-turn DIR`` (the ``bfcl_eval/data`` folder of the ``bfcl-eval`` wheel, Apache-2.0,
not in ``../shared``), two more files no setting was tuned on: BFCL v4's ``multi_turn_base``
sessions (2-7 user turns, each answered by its ground-truth calls, one assistant message per
call, then a short reply), offered the tools of their involved classes (``bfcl_multi_turn``), or
the tools of all eight classes, 128, as a gateway in front of many apps sees (``bfcl_multi_turn_all``).
"""

from __future__ import annotations

import argparse
import ast
import json
import random
import statistics
import tempfile
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
from tqdm import tqdm

import gateway  # noqa: F401  (offline tokenizer files)
from benchmarks.replay_upstream import Forwarded, ReplayUpstream, serve_replay
from benchmarks.tool_cases import data_dir
from gateway.assembly.tool_scoring import tool_name
from gateway.upstream.model_info import model_info
from tests.procs import run_gateway
from tests.shared_data import need

MODEL = "gpt-4.1"  # the model of the tau2 transcripts: its prices and cache ratio (0.25) apply
MIX_TOOLS = 45


@dataclass(frozen=True, slots=True)
class Session:
    id: str
    tools: tuple[Mapping[str, Any], ...]
    messages: tuple[Mapping[str, Any], ...]


@dataclass(slots=True)
class Arm:
    """What one gateway did with one file's sessions."""

    calls: int = 0
    could: int = 0
    requests: int = 0
    sessions: int = 0
    searches: int = 0
    changes: int = 0
    tool_tokens: int = 0
    prompt_tokens: int = 0
    cached_tokens: int = 0
    completion_tokens: int = 0
    cost: float = 0.0
    latency_ms: list[float] = field(default_factory=list)  # requests without a search


def _rows(name: str) -> list[dict[str, Any]]:
    with need(data_dir() / name).open(encoding="utf-8") as fh:
        return [json.loads(line) for line in fh if line.strip()]


def _session(row: Mapping[str, Any], tools: Sequence[Mapping[str, Any]] | None = None, tag: str = "") -> Session:
    return Session(f"{tag}{row['id']}", tuple(tools if tools is not None else row["tools"]), tuple(row["messages"]))


def _mix(base: Sequence[Mapping[str, Any]], *pools: Sequence[Mapping[str, Any]], seed: int) -> list[Any]:
    """``base`` plus tools from ``pools`` (in order, names unique) up to ``MIX_TOOLS``, shuffled by ``seed``."""
    tools = list(base)
    names = {tool_name(t) for t in tools}
    for pool in pools:
        for tool in pool:
            if len(tools) >= MIX_TOOLS:
                break
            if tool_name(tool) not in names:
                names.add(tool_name(tool))
                tools.append(tool)
    random.Random(seed).shuffle(tools)
    return tools


def data_files(runs: int) -> dict[str, list[Session]]:
    """Each file's sampled sessions (every k-th run, so both models of the tau2 files are in)."""
    solo, default, toolbench = (
        _rows("agent_loops/tau2_telecom_solo.jsonl"),
        _rows("agent_loops/tau2_telecom_default.jsonl"),
        _rows("toolbench.jsonl"),
    )
    bfcl = [t for row in _rows("bfcl.jsonl")[::7] for t in row["tools"]]
    pick = lambda rows: rows[:: max(1, len(rows) // runs)][:runs]  # noqa: E731
    tau2_agent_tools = default[0]["tools"]
    return {
        "tau2_telecom_solo": [_session(r) for r in pick(solo)],
        "tau2_telecom_default": [_session(r) for r in pick(default)],
        "toolbench": [_session(r) for r in toolbench[:runs]],
        "mix_tau2": [
            _session(r, _mix(r["tools"], toolbench[i % len(toolbench)]["tools"], bfcl[i * 5 :], seed=i), "mix-")
            for i, r in enumerate(pick(default))
        ],
        "mix_toolbench": [
            _session(r, _mix(r["tools"], tau2_agent_tools, bfcl[i * 5 :], seed=i), "mix-")
            for i, r in enumerate(toolbench[:runs])
        ],
    }


#: BFCL's multi-turn classes and the files of their function docs (``multi_turn_func_doc``).
BFCL_CLASSES = {
    "GorillaFileSystem": "gorilla_file_system",
    "MathAPI": "math_api",
    "MessageAPI": "message_api",
    "TwitterAPI": "posting_api",
    "TicketAPI": "ticket_api",
    "TradingBot": "trading_bot",
    "TravelAPI": "travel_booking",
    "VehicleControlAPI": "vehicle_control",
}
_JSON_TYPES = {"dict": "object", "float": "number", "tuple": "array", "any": "string"}


def _json_schema(node: Any) -> Any:
    """BFCL's Python-flavoured schema (``dict``, ``float``, ``tuple``) as JSON Schema."""
    if isinstance(node, dict):
        out = {k: _json_schema(v) for k, v in node.items() if k != "response"}
        if isinstance(out.get("type"), str):
            out["type"] = _JSON_TYPES.get(out["type"], out["type"])
        return out
    if isinstance(node, list):
        return [_json_schema(v) for v in node]
    return node


def _bfcl_tools(folder: Path, cls: str) -> list[dict[str, Any]]:
    lines = (folder / "multi_turn_func_doc" / f"{BFCL_CLASSES[cls]}.json").read_text(encoding="utf-8").splitlines()
    docs = [json.loads(line) for line in lines if line.strip()]
    return [
        {
            "type": "function",
            "function": {
                "name": d["name"],
                "description": d["description"],
                "parameters": _json_schema(d["parameters"]),
            },
        }
        for d in docs
    ]


def _bfcl_call(text: str, tools: Sequence[Mapping[str, Any]], n: int) -> dict[str, Any]:
    """``cd(folder='document')`` as an OpenAI tool call (positional arguments by parameter order)."""
    call = ast.parse(text, mode="eval").body
    assert isinstance(call, ast.Call) and isinstance(call.func, ast.Name)
    name = call.func.id
    params = next((list(t["function"]["parameters"].get("properties", {})) for t in tools if tool_name(t) == name), [])
    args = {params[i] if i < len(params) else f"arg{i}": ast.literal_eval(a) for i, a in enumerate(call.args)}
    args |= {k.arg: ast.literal_eval(k.value) for k in call.keywords if k.arg}
    return {"id": f"call_{n}", "type": "function", "function": {"name": name, "arguments": json.dumps(args)}}


def bfcl_sessions(folder: Path, runs: int, every_class: bool) -> list[Session]:
    """BFCL multi-turn sessions: each turn's question, its ground-truth calls with a stub result, a reply."""
    rows = [json.loads(x) for x in (folder / "BFCL_v4_multi_turn_base.json").read_text(encoding="utf-8").splitlines()]
    answers = {
        r["id"]: r["ground_truth"]
        for r in map(json.loads, (folder / "possible_answer" / "BFCL_v4_multi_turn_base.json").read_text().splitlines())
    }
    all_tools = [t for cls in BFCL_CLASSES for t in _bfcl_tools(folder, cls)]
    out: list[Session] = []
    for row in rows[:: max(1, len(rows) // runs)][:runs]:
        own = [t for cls in row["involved_classes"] for t in _bfcl_tools(folder, cls)]
        tools = all_tools if every_class else own
        messages: list[dict[str, Any]] = []
        n = 0
        for turn, calls in zip(row["question"], answers[row["id"]], strict=True):
            messages += turn
            for text in calls:
                n += 1
                call = _bfcl_call(text, own, n)
                messages.append({"role": "assistant", "content": None, "tool_calls": [call]})
                messages.append({"role": "tool", "tool_call_id": call["id"], "content": '{"status": "ok"}'})
            messages.append({"role": "assistant", "content": "Done."})
        out.append(Session(f"bfcl-{'all-' if every_class else ''}{row['id']}", tuple(tools), tuple(messages)))
    return out


def steps(session: Session, max_steps: int) -> Iterator[tuple[list[Mapping[str, Any]], Mapping[str, Any]]]:
    """Each client request of a session: the messages before an assistant message, and that message."""
    count = 0
    for i, message in enumerate(session.messages):
        if message.get("role") == "assistant" and i > 0:
            yield list(session.messages[:i]), message
            count += 1
            if count >= max_steps:
                return


@contextmanager
def served(policy: Mapping[str, Any]) -> Iterator[tuple[ReplayUpstream, httpx.Client]]:
    """A replay upstream and a ``ventana serve`` gateway in front of it, under ``policy``."""
    replay = ReplayUpstream()
    with serve_replay(replay) as upstream, tempfile.TemporaryDirectory() as tmp:
        models = [{"name": MODEL, "litellm_model": f"openai/{MODEL}", "api_base": upstream}]
        config = {"models": models, "database_url": f"sqlite:///{tmp}/bench.db", "policy": policy}
        with run_gateway(Path(tmp), config) as gw, httpx.Client(base_url=gw.base_url, timeout=120) as client:
            yield replay, client


def replay_file(
    name: str, sessions: Sequence[Session], policies: Mapping[str, Mapping[str, Any]], max_steps: int
) -> dict[str, Arm]:
    """Replay ``sessions`` through one gateway per policy; each step goes to every gateway in turn
    (alternating who goes first), so load from elsewhere on the machine hits the arms alike."""
    info = model_info(f"openai/{MODEL}")
    arms = {arm: Arm() for arm in policies}
    total = sum(1 for s in sessions for _ in steps(s, max_steps))
    with ExitStack() as stack:
        gateways = {arm: stack.enter_context(served(policy)) for arm, policy in policies.items()}
        bar = tqdm(total=total, desc=name, leave=False)
        for session in sessions:
            previous: dict[str, tuple[str, ...] | None] = dict.fromkeys(arms)
            for arm in arms.values():
                arm.sessions += 1
            for n, (messages, expected) in enumerate(steps(session, max_steps)):
                body = {"model": MODEL, "messages": messages, "tools": list(session.tools)}
                order = list(gateways) if n % 2 == 0 else list(reversed(gateways))
                for arm_name in order:
                    replay, client = gateways[arm_name]
                    replay.expect(expected, session.tools)
                    start = len(replay.log)
                    began = time.perf_counter()
                    headers = {"X-Session-Id": session.id}
                    client.post("/chat/completions", json=body, headers=headers).raise_for_status()
                    elapsed = (time.perf_counter() - began) * 1000
                    sent = replay.log[start:]
                    previous[arm_name] = _account(arms[arm_name], sent, expected, previous[arm_name], info, elapsed)
                bar.update(1)
        bar.close()
    return arms


def _account(
    arm: Arm,
    sent: Sequence[Forwarded],
    expected: Mapping[str, Any],
    previous: tuple[str, ...] | None,
    info: Any,
    elapsed_ms: float,
) -> tuple[str, ...] | None:
    """Fold one client request's upstream calls into ``arm``; the last tool list sent."""
    arm.requests += 1
    wanted = [str(c["function"]["name"]) for c in expected.get("tool_calls") or ()]
    arm.calls += len(wanted)
    arm.could += sum(name in sent[-1].offered for name in wanted)
    searched = sum(f.kind == "search" for f in sent)
    arm.searches += searched
    if not searched:
        arm.latency_ms.append(elapsed_ms)
    for f in sent:
        if previous is not None and f.offered != previous:
            arm.changes += 1
        previous = f.offered
        arm.tool_tokens += f.tool_tokens
        arm.prompt_tokens += f.prompt_tokens
        arm.cached_tokens += f.cached_tokens
        arm.completion_tokens += 20
        fresh = f.prompt_tokens - f.cached_tokens
        arm.cost += (
            fresh * info.input_cost_per_token
            + f.cached_tokens * info.cache_read_cost_per_token
            + 20 * info.output_cost_per_token
        )
    return previous


def row(file: str, arm_name: str, arm: Arm, base: Arm) -> str:
    tools = arm.tool_tokens / arm.requests
    fewer = 1 - arm.tool_tokens / base.tool_tokens if base.tool_tokens else 0.0
    tokens = (arm.prompt_tokens + arm.completion_tokens) / (base.prompt_tokens + base.completion_tokens)
    cost = arm.cost / base.cost if base.cost else 0.0
    added = statistics.median(arm.latency_ms) - statistics.median(base.latency_ms) if arm.latency_ms else 0.0
    return (
        f"| {file} | {arm_name} | {arm.sessions} | {arm.requests} | {arm.calls} | {arm.could / max(arm.calls, 1):.3f} "
        f"| {tools:,.0f} | {fewer:.1%} | {tokens:.3f}x | {cost:.3f}x | {arm.changes / arm.sessions:.2f} "
        f"| {arm.searches / arm.sessions:.2f} | {added:+.1f} |"
    )


HEADER = (
    "| file | arm | sessions | requests | tool calls | could call | tool tokens / request | fewer tool tokens "
    "| upstream tokens vs all | cost vs all | set changes / session | searches / session | added latency ms |\n"
    "|---|---|---|---|---|---|---|---|---|---|---|---|---|"
)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--runs", type=int, default=6, help="sessions per file")
    parser.add_argument("--max-steps", type=int, default=30, help="client requests per session")
    parser.add_argument("--files", default="", help="comma-separated subset of the file names")
    parser.add_argument("--policy", default="{}", help="JSON policy.tools of the pruning arm (default: defaults)")
    parser.add_argument("--label", default="default", help="name of the pruning arm in the table")
    parser.add_argument("--bfcl-multi-turn", type=Path, help="bfcl_eval/data of the bfcl-eval wheel (two more files)")
    args = parser.parse_args(argv)
    files = data_files(args.runs)
    if args.bfcl_multi_turn:
        files["bfcl_multi_turn"] = bfcl_sessions(args.bfcl_multi_turn, args.runs, every_class=False)
        files["bfcl_multi_turn_all"] = bfcl_sessions(args.bfcl_multi_turn, args.runs, every_class=True)
    chosen = [f for f in files if not args.files or f in args.files.split(",")]
    tools_policy = json.loads(args.policy)
    lines = [HEADER]
    policies = {"send all": {"tools": {"enabled": False}}, args.label: {"tools": tools_policy}}
    for name in tqdm(chosen, desc="files"):
        arms = replay_file(name, files[name], policies, args.max_steps)
        lines += [row(name, arm, result, arms["send all"]) for arm, result in arms.items()]
        print(*lines[-2:], sep="\n", flush=True)
    print("\n".join(lines))


if __name__ == "__main__":
    main()
