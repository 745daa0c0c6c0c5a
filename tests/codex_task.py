"""A scripted Codex CLI file task over several turns, shared by ``tests/e2e/test_codex_native.py`` and
``benchmarks/codex_native.py``: the simulator replays the model's side, Codex runs the commands for real."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
from pathlib import Path
from typing import Any

from tests.procs import GatewayHandle, SimHandle

TURNS = (
    "Create note.txt with the numbers 1 to 1500, one per line, then read it back.",
    "Append the line ventana-end to note.txt and show its last line.",
    "How many lines does note.txt have now?",
)
ANSWERS = ("note.txt holds the numbers 1 to 1500.", "The last line is ventana-end.", "note.txt has 1501 lines.")
COMMANDS = (
    (("call_write", "seq 1 1500 > note.txt"), ("call_read", "cat note.txt")),
    (("call_append", "echo ventana-end >> note.txt"), ("call_tail", "tail -n 1 note.txt")),
    (("call_count", "wc -l note.txt"),),
)


def transcript(path: Path) -> Path:
    """The scripted run the simulator replays: per turn, its commands, then the answer."""
    messages: list[dict[str, Any]] = []
    for task, commands, answer in zip(TURNS, COMMANDS, ANSWERS, strict=True):
        messages.append({"role": "user", "content": task})
        for call_id, cmd in commands:
            call = {
                "id": call_id,
                "type": "function",
                "function": {"name": "exec_command", "arguments": json.dumps({"cmd": cmd})},
            }
            messages.append({"role": "assistant", "content": None, "tool_calls": [call]})
            messages.append({"role": "tool", "tool_call_id": call_id, "content": ""})
        messages.append({"role": "assistant", "content": answer})
    tools = [{"type": "function", "function": {"name": "exec_command", "description": "Runs a command"}}]
    path.write_text(json.dumps({"id": "codex-note", "tools": tools, "messages": messages}) + "\n")
    return path


def gateway_config(sim: SimHandle, store: Path, **model: Any) -> dict[str, Any]:
    return {
        "models": [
            {
                "name": "small-window",
                "litellm_model": "openai/gpt-4o-mini",
                "api_base": sim.base_url,
                "context_window": 12000,
                **model,
            }
        ],
        "policy": {
            # OpenAI's own tool restriction: the gateway's find_tools loop answers chat only (docs/responses.md)
            "tools": {"modes": {"openai": "allowed_tools"}},
            "compaction": {"keep_recent_turns": 1, "keep_recent_rounds": 2},
        },
        "database_url": f"sqlite:///{store}",
    }


def codex_home(home: Path, gw: GatewayHandle, *, name: str = "Ventana", top: str = "") -> dict[str, str]:
    """Codex's config toward the gateway. ``name = "OpenAI"`` is how Codex tells a provider that compacts
    remotely (``compaction_trigger``; any other name compacts by asking the model); ``top``: more settings."""
    home.mkdir()
    (home / "config.toml").write_text(
        f'model = "small-window"\nmodel_provider = "ventana"\n{top}\n[model_providers.ventana]\nname = "{name}"\n'
        f'base_url = "{gw.base_url}"\nwire_api = "responses"\nenv_key = "VENTANA_API_KEY"\n'
    )
    return {**os.environ, "CODEX_HOME": str(home), "VENTANA_API_KEY": "sk-codex-native"}


def run_codex(binary: str, work: Path, env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [binary, "exec", "--skip-git-repo-check", "--dangerously-bypass-approvals-and-sandbox", *args],
        cwd=work,
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=240,
    )


def records(store: Path) -> list[tuple[str, list[dict[str, Any]]]]:
    """(session, decisions) of every recorded request, oldest first (the writer has flushed on stop)."""
    with sqlite3.connect(store) as db:
        rows = db.execute("select session_id, decisions from requests order by created_at").fetchall()
    return [(session, json.loads(decisions)) for session, decisions in rows]


def usage(store: Path) -> list[tuple[int, int, int]]:
    """(prompt tokens, cached tokens, tokens the gateway assembled) of every recorded request, oldest first."""
    with sqlite3.connect(store) as db:
        rows = db.execute("select prompt_tokens, cached_tokens, tokens_assembled from requests order by created_at")
        return [(int(p or 0), int(c or 0), int(a or 0)) for p, c, a in rows.fetchall()]
