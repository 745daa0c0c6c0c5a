"""Codex CLI's three-turn file task through ``ventana serve``, native and translated, per installed version.

    python -m benchmarks.codex_native [--codex PATH ...] [--window 12000] [--codex-window 12000]

For each Codex binary (default: ``codex`` on PATH) and each door toward the simulator (``native``:
``wire_api: responses``, the client's Responses body; ``translated``: Chat Completions), it runs the
scripted task of ``tests/codex_task.py`` (create note.txt, read it back; append; count its lines) in
a scratch folder and prints one row: whether every turn answered and the file is right, the model
calls, the prompt and cached tokens the simulator reported, compactions and checkpoint reuses, and
the wall time. The simulator replays the model's side; Codex runs the commands for real.

``--codex-window N`` also gives Codex itself a window of N tokens (``model_context_window``, and
``model_auto_compact_token_limit`` at half of it) and names the provider ``OpenAI``, so Codex asks the
server to compact (``compaction_trigger``) and the gateway answers; ``codex compactions`` counts them.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

from tests.codex_task import (
    ANSWERS,
    TURNS,
    codex_home,
    gateway_config,
    records,
    run_codex,
    transcript,
    usage,
)
from tests.procs import run_gateway, run_simulator


def run_once(binary: str, door: str, window: int, codex_window: int | None = None) -> dict[str, object]:
    with tempfile.TemporaryDirectory(prefix="codex-native-") as scratch:
        tmp = Path(scratch)
        work = tmp / "work"
        work.mkdir()
        store = tmp / "store.db"
        started = time.perf_counter()
        ok = True
        with run_simulator(tmp, replay=transcript(tmp / "transcript.jsonl")) as sim:
            model = {"wire_api": "responses"} if door == "native" else {}
            config = gateway_config(sim, store, **model)
            config["models"][0]["context_window"] = window
            with run_gateway(tmp, config) as gw:
                if codex_window is None:
                    env = codex_home(tmp / "home", gw)
                else:
                    limit = codex_window // 2
                    top = f"model_context_window = {codex_window}\nmodel_auto_compact_token_limit = {limit}\n"
                    env = codex_home(tmp / "home", gw, name="OpenAI", top=top)
                said = ""
                for turn, (task, answer) in enumerate(zip(TURNS, ANSWERS, strict=True)):
                    args = (task,) if turn == 0 else ("resume", "--last", task)
                    done = run_codex(binary, work, env, *args)
                    said += done.stdout + done.stderr
                    ok = ok and done.returncode == 0 and answer in done.stdout
            bodies = sim.received()
        seconds = time.perf_counter() - started
        note = work / "note.txt"
        ok = ok and note.exists() and note.read_text().splitlines()[-1:] == ["ventana-end"]
        actions = [(d["pass"], d["action"]) for _, decisions in records(store) for d in decisions]
        rows = usage(store)
    return {
        "ok": ok,
        "calls": len(bodies),
        "native": all("input" in b for b in bodies),
        "prompt": sum(r[0] for r in rows),
        "cached": sum(r[1] for r in rows),
        "compacted": actions.count(("compact_history", "compacted")),
        "reused": actions.count(("compact_history", "checkpoint_reused")),
        "codex_compactions": said.count("context compacted"),
        "compact_errors": said.count("Error running remote compact task"),
        "seconds": round(seconds, 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--codex", action="append", help="a codex binary (repeatable); default: codex on PATH")
    parser.add_argument("--window", type=int, default=12000, help="the model's context window in tokens")
    parser.add_argument("--codex-window", type=int, help="Codex's own window: it compacts remotely through Ventana")
    args = parser.parse_args()
    binaries = args.codex or [b for b in (shutil.which("codex"),) if b]
    if not binaries:
        raise SystemExit("codex is not installed (npm install -g @openai/codex)")
    print(
        "| codex | door | ok | model calls | body native | prompt tokens | cached tokens | compacted | reused "
        "| codex compactions | compaction errors | s |"
    )
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for binary in binaries:
        version = subprocess.run([binary, "--version"], capture_output=True, text=True).stdout.strip()
        for door in ("native", "translated"):
            r = run_once(binary, door, args.window, args.codex_window)
            print(
                f"| {version} | {door} | {'yes' if r['ok'] else 'NO'} | {r['calls']} | {r['native']} | {r['prompt']:,} "
                f"| {r['cached']:,} | {r['compacted']} | {r['reused']} | {r['codex_compactions']} "
                f"| {r['compact_errors']} | {r['seconds']} |"
            )


if __name__ == "__main__":
    main()
