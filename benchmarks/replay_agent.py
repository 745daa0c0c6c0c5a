"""Drive the gateway with what real agents did: the simulator replays agent_loops transcripts.

Per data file, a simulator started with ``--replay FILE`` sits behind a real ``ventana
serve`` (bundled policy: tool pruning and compaction on, a small context window so long
runs compact). A client resends each sampled transcript turn by turn, with the real tool
results, and checks that it received the transcript's real next assistant message. The
simulator's ``/sim/stats`` says how often the gateway hid the tool the agent called next
(a miss) and whether any turn could not be placed (unmatched) after compaction.
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path
from typing import Any

import httpx
import openai
import orjson
from tqdm import tqdm

from gateway.providersim.completion import is_summary_request
from gateway.providersim.replay import Replayer, load_transcripts
from tests.procs import run_gateway, run_simulator
from tests.shared_data import data_path, need

FILES = ("tau2_telecom_solo.jsonl", "tau2_telecom_default.jsonl", "mini_swe_agent_deepseek.jsonl")


def _sample(path: Path, runs: int, max_turns: int) -> list[dict[str, Any]]:
    """Every k-th run, so the sample spans the file's models and tasks (deterministic)."""
    rows = [orjson.loads(line) for line in path.read_bytes().splitlines() if line.strip()]
    step = max(1, len(rows) // runs)
    picked = rows[::step][:runs]
    for row in picked:
        turns = [k for k, m in enumerate(row["messages"]) if m["role"] == "assistant"]
        if len(turns) > max_turns:  # cut at a turn so every kept request is a real one
            row["messages"] = row["messages"][: turns[max_turns]]
    return picked


def _edited(sent: list[dict[str, Any]], received: dict[str, Any]) -> bool:
    """Whether the gateway shortened the history or cleared a tool result before forwarding it."""
    got = received["messages"]
    kept = {str(m.get("content")) for m in got if m.get("role") == "tool"}
    cleared = any(m["role"] == "tool" and str(m.get("content")) not in kept for m in sent)
    return cleared or sum(m.get("role") != "user" for m in got) < sum(m["role"] != "user" for m in sent)


def _same(got: Any, real: dict[str, Any]) -> bool:
    calls = [c.model_dump() for c in got.tool_calls or []]
    return bool(got.content == real.get("content") and calls == (real.get("tool_calls") or []))


def run_file(name: str, runs: int, max_turns: int, window: int, max_tools: int | None, tmp: Path) -> dict[str, Any]:
    rows = _sample(need(data_path("agent_loops", name)), runs, max_turns)
    replay_file = tmp / f"replay-{name}"
    replay_file.write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in rows))
    turns = exact = refused = 0
    refusals: list[str] = []
    sent: list[list[dict[str, Any]]] = []
    offered: list[float] = []
    with run_simulator(tmp, record=True, cache=False, replay=replay_file) as sim:
        models = [
            {"name": "agent", "litellm_model": "openai/gpt-4o-mini", "api_base": sim.base_url, "context_window": window}
        ]
        config: dict[str, Any] = {"models": models}
        if max_tools is not None:
            config["policy"] = {"tools": {"max_tools": max_tools, "min_tools": 1, "grow_top": 0}}
        with run_gateway(tmp, config) as gw:
            client = openai.OpenAI(base_url=gw.base_url, api_key="sk-bench", max_retries=0, timeout=120)
            for row in tqdm(rows, desc=name, leave=False):
                for k, m in enumerate(row["messages"]):
                    if m["role"] != "assistant":
                        continue
                    turns += 1
                    try:
                        got = client.chat.completions.create(
                            model="agent",
                            messages=row["messages"][:k],
                            tools=row["tools"],
                            extra_headers={"x-session-id": "replay-" + row["id"][-40:]},
                        )
                    except openai.APIStatusError as exc:  # the run cannot go on without this turn
                        refused += 1
                        refusals.append(f"{exc.status_code} at turn {k}: {str(exc.message)[:160]}")
                        break
                    exact += _same(got.choices[0].message, m)
                    sent.append(row["messages"][:k])
            received = sim.received()
            for body in received:
                offered.append(len(body.get("tools") or []))
            stats = httpx.get(sim.url + "/sim/stats").json()["replay"]
    counts = stats["counts"]
    chat = [b for b in received if not is_summary_request(b["messages"])]
    compacted = sum(_edited(s, b) for s, b in zip(sent, chat, strict=False))
    return {
        "file": name,
        "runs": len(rows),
        "turns": turns,
        "exact": exact,
        "refused": refused,
        "refusals": refusals,
        "replayed": counts.get("replayed", 0),
        "miss": counts.get("miss", 0),
        "find_tools": counts.get("find_tools", 0),
        "unmatched": counts.get("unmatched", 0),
        "ended": counts.get("ended", 0),
        "tools_offered": sum(offered) / len(offered) if offered else 0.0,
        "tools_total": sum(len(r["tools"]) for r in rows) / len(rows),
        "compacted_turns": compacted,
        "missed_tools": sorted({t for miss in stats["misses"] for t in miss["tools"]}),
    }


def offline(name: str, keep: int) -> tuple[int, int, int, int]:
    """Every turn of every run of a file, asked with its middle folded into a summary (no processes).

    Returns (runs, turns, placed on the right turn, placed on a run with an identical history)."""
    transcripts = load_transcripts(need(data_path("agent_loops", name)))
    by_id = {t.id: t for t in transcripts}
    replayer = Replayer(transcripts)
    turns = right = twin = 0
    for t in tqdm(transcripts, desc=name, leave=False):
        tools = [{"type": "function", "function": {"name": n, "description": d}} for n, d in t.tools.items()]
        for k, m in enumerate(t.messages):
            if m["role"] != "assistant":
                continue
            history = t.messages[:k]
            cuts = [i for i in range(1, len(history) - keep) if history[i]["role"] == "assistant"]
            if cuts:  # keep the opening and the newest rounds; never split a call from its results
                history = [*history[:1], {"role": "user", "content": "<summary>...</summary>"}, *history[cuts[-1] :]]
            verdict = replayer.answer({"messages": history, "tools": tools})
            turns += 1
            if verdict.transcript == t.id and verdict.message == m:
                right += 1
            elif verdict.transcript and by_id[verdict.transcript].messages[:k] == t.messages[:k]:
                twin += 1
    return len(transcripts), turns, right, twin


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3, help="transcripts sampled per data file")
    parser.add_argument("--max-turns", type=int, default=80, help="assistant turns replayed per transcript")
    parser.add_argument("--window", type=int, default=32000, help="context window of the gateway's model")
    parser.add_argument("--files", nargs="*", default=list(FILES))
    parser.add_argument(
        "--max-tools", type=int, default=None, help="prune harder than the bundled policy (no growth of the set)"
    )
    parser.add_argument(
        "--offline",
        type=int,
        metavar="KEEP",
        default=None,
        help="instead: place every turn of every run in-process, the history folded to its newest KEEP messages",
    )
    args = parser.parse_args()
    if args.offline is not None:
        print("| file | runs | turns | placed on the right turn | on a run with the same history | misplaced |")
        print("| --- | --- | --- | --- | --- | --- |")
        for name in args.files:
            runs, turns, right, twin = offline(name, args.offline)
            print(f"| {name} | {runs} | {turns} | {right} | {twin} | {turns - right - twin} |", flush=True)
        return
    print(
        "| file | runs | turns | client got the real turn | refused by the gateway | replayed | miss (tool hidden) | "
        "find_tools | unmatched | tools offered / in file | turns sent compacted | tools missed |"
    )
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    notes: list[str] = []
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.files:
            r = run_file(name, args.runs, args.max_turns, args.window, args.max_tools, Path(tmp))
            print(
                f"| {r['file']} | {r['runs']} | {r['turns']} | {r['exact']}/{r['turns']} | {r['refused']} | "
                f"{r['replayed']} | "
                f"{r['miss']} | {r['find_tools']} | {r['unmatched']} | {r['tools_offered']:.1f} / "
                f"{r['tools_total']:.1f} | {r['compacted_turns']} | {', '.join(r['missed_tools']) or '-'} |",
                flush=True,
            )
            notes += [f"- {name}: {line}" for line in r["refusals"]]
    if notes:
        print("\nRefused turns (the client's run stopped there):\n" + "\n".join(notes))


if __name__ == "__main__":
    main()
