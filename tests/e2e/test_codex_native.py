"""Codex CLI through ``ventana serve``: a multi-step file task over several turns, natively, compacted.

The upstream is the simulator's Responses route (``wire_api: responses``) replaying a scripted
transcript: the model creates ``note.txt`` with Codex's ``exec_command``, reads it back, and on the
next two turns (``codex exec resume --last``) appends to it and counts its lines. Codex runs the
commands for real in a scratch folder. The window is small (12,000 tokens), so the big ``cat``
output is compacted away and later turns reuse the checkpoint. Also: three Codex conversations
in one folder are three gateway sessions (Codex names its session in its ``session-id`` header).

``codex`` on PATH is the version the suite pins (``tests/run.sh``); ``VENTANA_CODEX_BINS``
(paths separated by ``:``) adds other installed versions, e.g. the newest one from npm.
Skipped only when no ``codex`` binary is found.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.codex_task import ANSWERS, TURNS, codex_home, gateway_config, records, run_codex, transcript
from tests.procs import SimHandle, run_gateway, run_simulator

BINARIES = [b for b in (shutil.which("codex"), *os.environ.get("VENTANA_CODEX_BINS", "").split(":")) if b]
pytestmark = pytest.mark.skipif(not BINARIES, reason="codex is not installed (npm install -g @openai/codex)")


@pytest.fixture(scope="module")
def replay_sim(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SimHandle]:
    tmp = tmp_path_factory.mktemp("codex-sim")
    with run_simulator(tmp, replay=transcript(tmp / "transcript.jsonl")) as handle:
        yield handle


@pytest.mark.parametrize("binary", BINARIES)
def test_codex_finishes_a_multi_step_file_task_natively_compacted_at_a_small_window(
    binary: str, replay_sim: SimHandle, tmp_path: Path
) -> None:
    replay_sim.reset()
    store = tmp_path / "store.db"
    work = tmp_path / "work"
    work.mkdir()
    with run_gateway(tmp_path, gateway_config(replay_sim, store, wire_api="responses")) as gw:
        env = codex_home(tmp_path / "codex-home", gw)
        for turn, (task, answer) in enumerate(zip(TURNS, ANSWERS, strict=True)):
            args = (task,) if turn == 0 else ("resume", "--last", task)
            done = run_codex(binary, work, env, *args)
            assert done.returncode == 0, done.stdout + done.stderr
            assert answer in done.stdout, done.stdout + done.stderr
    lines = (work / "note.txt").read_text().splitlines()
    assert len(lines) == 1501 and lines[0] == "1" and lines[-1] == "ventana-end", "Codex ran the commands"
    bodies = replay_sim.received()
    assert len(bodies) == 8, "three turns: 3 + 3 + 2 model calls"
    assert all("input" in b and "messages" not in b for b in bodies), "the upstream got Codex's Responses bodies"
    assert all(b["include"] == ["reasoning.encrypted_content"] and b["store"] is False for b in bodies)
    summaries = [b for b in bodies if "<summary" in json.dumps(b["input"])]
    assert summaries, "the small window compacted the history"
    last = bodies[-1]["input"]
    reads = {i.get("call_id") for i in last if i.get("type") == "function_call" and "cat note.txt" in str(i)}
    resent = [i for i in last if i.get("type") == "function_call_output" and i.get("call_id") in reads]
    # The 1,501-line read is summarised away, or its call kept with the output cleared (a stub naming it).
    assert all(str(i.get("output")).startswith("[result of ") for i in resent), "the big read is not resent"
    rows = records(store)
    assert len({session for session, _ in rows}) == 1, "one Codex session, resumed twice, is one gateway session"
    actions = {(d["pass"], d["action"]) for _, decisions in rows for d in decisions}
    assert ("compact_history", "compacted") in actions
    assert ("compact_history", "checkpoint_reused") in actions, "later turns keep the same summary (cache)"


def test_three_codex_conversations_in_one_folder_are_three_sessions(sim: SimHandle, tmp_path: Path) -> None:
    """Every Codex conversation opens with the same <environment_context> message; its session header
    tells them apart. A resumed conversation stays in its own session."""
    store = tmp_path / "store.db"
    work = tmp_path / "work"
    work.mkdir()
    config = gateway_config(sim, store)  # translated to chat: identity does not depend on the door
    config["models"][0]["context_window"] = 128000
    with run_gateway(tmp_path, config) as gw:
        env = codex_home(tmp_path / "codex-home", gw)
        for _ in range(3):
            done = run_codex(BINARIES[0], work, env, "Say hello to Ventana")
            assert done.returncode == 0, done.stdout + done.stderr
        again = run_codex(BINARIES[0], work, env, "resume", "--last", "Now say goodbye")
        assert again.returncode == 0, again.stdout + again.stderr
    sessions = [session for session, _ in records(store)]
    assert len(sessions) == 4
    assert len(set(sessions[:3])) == 3, "three conversations, three sessions"
    assert sessions[3] == sessions[2], "the resumed conversation is the last one's session"
