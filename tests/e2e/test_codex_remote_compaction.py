"""Codex CLI's remote compaction through Ventana: with a small context window Codex asks the server to compact
(``compaction_trigger`` last in ``input`` of a streamed ``/v1/responses`` request, remote compaction v2) and
Ventana answers it for a chat-only upstream (the simulator's chat route, replaying the scripted file task of
``tests/codex_task.py``). Codex treats a provider named ``OpenAI`` as one that compacts remotely; any other
name makes it summarise with the model itself, so the provider here is named so. Before the gateway served
the trigger it refused it with a 400 and every compaction failed."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from tests.codex_task import ANSWERS, TURNS, codex_home, gateway_config, run_codex, transcript
from tests.procs import run_gateway, run_simulator

CODEX = os.environ.get("VENTANA_CODEX_BIN") or shutil.which("codex")
pytestmark = pytest.mark.skipif(CODEX is None, reason="codex is not installed (npm install -g @openai/codex)")

#: Codex's own window and the token count at which it compacts: far below its ~5,000-token instructions plus
#: a 1,500-line ``cat``, so it compacts in the middle of the first turn and again on later ones.
SMALL_WINDOW = 'model_context_window = 12000\nmodel_auto_compact_token_limit = 6000\n'


def test_codex_compacts_through_ventana_with_a_small_window(tmp_path: Path) -> None:
    assert CODEX is not None
    work = tmp_path / "work"
    work.mkdir()
    with run_simulator(tmp_path, replay=transcript(tmp_path / "transcript.jsonl")) as sim:
        with run_gateway(tmp_path, gateway_config(sim, tmp_path / "store.db")) as gw:
            env = codex_home(tmp_path / "codex-home", gw, name="OpenAI", top=SMALL_WINDOW)
            said = ""
            for turn, (task, answer) in enumerate(zip(TURNS, ANSWERS, strict=True)):
                args = (task,) if turn == 0 else ("resume", "--last", task)
                done = run_codex(CODEX, work, env, *args)
                said += done.stdout + done.stderr
                assert done.returncode == 0, done.stdout + done.stderr
                assert answer in done.stdout, done.stdout + done.stderr
        bodies = sim.received()
    lines = (work / "note.txt").read_text().splitlines()
    assert len(lines) == 1501 and lines[-1] == "ventana-end", "Codex ran every command"
    assert "Error running remote compact task" not in said
    assert said.count("context compacted") >= 3, "Codex compacted on every turn, each time answered"
    assert len(bodies) == 8, "the compactions called no model: 3 + 3 + 2 calls, as without them"
    compacted = [b for b in bodies if "compacted by the gateway" in json.dumps(b["messages"])]
    assert len(compacted) >= 6, "after the first call, the model read the gateway's summary in place of the history"
    assert "1\\n2\\n3\\n4" not in json.dumps(bodies[-1]["messages"]), "the big cat output is gone"
