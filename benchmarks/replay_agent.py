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

from tests.procs import run_gateway, run_simulator
from tests.shared_data import shared_path

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


def _same(got: Any, real: dict[str, Any]) -> bool:
    calls = [c.model_dump() for c in got.tool_calls or []]
    return bool(got.content == real.get("content") and calls == (real.get("tool_calls") or []))


def run_file(name: str, runs: int, max_turns: int, window: int, max_tools: int | None, tmp: Path) -> dict[str, Any]:
    rows = _sample(shared_path("data", "agent_loops", name), runs, max_turns)
    replay_file = tmp / f"replay-{name}"
    replay_file.write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in rows))
    turns = exact = 0
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
                    got = client.chat.completions.create(
                        model="agent",
                        messages=row["messages"][:k],
                        tools=row["tools"],
                        extra_headers={"x-session-id": "replay-" + row["id"][-40:]},
                    )
                    turns += 1
                    exact += _same(got.choices[0].message, m)
            received = sim.received()
            for body in received:
                offered.append(len(body.get("tools") or []))
            stats = httpx.get(sim.url + "/sim/stats").json()["replay"]
    counts = stats["counts"]
    chat = [b for b in received if not any("<transcript" in str(x.get("content")) for x in b["messages"])]
    compacted = sum(any(str(x.get("content") or "").startswith("<summary") for x in b["messages"]) for b in chat)
    return {
        "file": name,
        "runs": len(rows),
        "turns": turns,
        "exact": exact,
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3, help="transcripts sampled per data file")
    parser.add_argument("--max-turns", type=int, default=40, help="assistant turns replayed per transcript")
    parser.add_argument("--window", type=int, default=32000, help="context window of the gateway's model")
    parser.add_argument("--files", nargs="*", default=list(FILES))
    parser.add_argument(
        "--max-tools", type=int, default=None, help="prune harder than the bundled policy (no growth of the set)"
    )
    args = parser.parse_args()
    print(
        "| file | runs | turns | client got the real turn | replayed | miss (tool hidden) | find_tools | "
        "unmatched | tools offered / in file | turns sent compacted | tools missed |"
    )
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.files:
            r = run_file(name, args.runs, args.max_turns, args.window, args.max_tools, Path(tmp))
            print(
                f"| {r['file']} | {r['runs']} | {r['turns']} | {r['exact']}/{r['turns']} | {r['replayed']} | "
                f"{r['miss']} | {r['find_tools']} | {r['unmatched']} | {r['tools_offered']:.1f} / "
                f"{r['tools_total']:.1f} | {r['compacted_turns']} | {', '.join(r['missed_tools']) or '-'} |",
                flush=True,
            )


if __name__ == "__main__":
    main()
