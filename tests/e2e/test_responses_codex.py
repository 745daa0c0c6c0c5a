"""Codex CLI (``codex exec``) runs against Ventana and the simulator, offline, over ``/v1/responses``.

Codex sends its own tools (functions, a ``namespace`` of sub-agent functions and the hosted
``web_search``), streams, and stores nothing (``store: false``, the whole history every turn).
Skipped only when the ``codex`` binary is absent (``tests/run.sh`` installs the pinned version with npm).
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import httpx
import pytest

from tests.procs import GatewayHandle, SimHandle

#: ``tests/run.sh`` points this at the pinned version (tests/clients.txt); benchmarks/clients_latest.py at the newest.
CODEX = os.environ.get("VENTANA_CODEX_BIN") or shutil.which("codex")
pytestmark = pytest.mark.skipif(CODEX is None, reason="Codex CLI is not installed (npm could not reach its registry)")


def _config(home: Path, gw: GatewayHandle) -> None:
    home.mkdir()
    (home / "config.toml").write_text(
        'model = "gpt-4o-mini"\n'
        'model_provider = "ventana"\n\n'
        "[model_providers.ventana]\n"
        'name = "Ventana"\n'
        f'base_url = "{gw.base_url}"\n'
        'wire_api = "responses"\n'
        'env_key = "VENTANA_API_KEY"\n'
    )


def _codex(work: Path, env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    """``codex exec`` in ``work``, non-interactive, its output captured."""
    assert CODEX is not None
    return subprocess.run(
        [CODEX, "exec", "--skip-git-repo-check", *args],
        cwd=work,
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=180,
    )


def test_codex_exec_answers_through_ventana(default_gateway: GatewayHandle, sim: SimHandle, tmp_path: Path) -> None:
    assert CODEX is not None
    _config(tmp_path / "codex-home", default_gateway)
    work = tmp_path / "work"
    work.mkdir()
    env = {**os.environ, "CODEX_HOME": str(tmp_path / "codex-home"), "VENTANA_API_KEY": "sk-codex"}
    done = _codex(work, env, "Say hello to Ventana")
    assert done.returncode == 0, done.stdout + done.stderr
    forwarded = sim.received()[-1]
    assert forwarded["stream"] is True
    assert forwarded["messages"][-1]["content"][0]["text"] == "Say hello to Ventana"
    names = {t["function"]["name"] for t in forwarded["tools"]}
    assert "exec_command" in names and "close_agent" in names, "namespace functions are offered by name"
    direct = httpx.post(sim.base_url + "/chat/completions", json={**forwarded, "stream": False}, timeout=30).json()
    answer = direct["choices"][0]["message"]["content"]
    assert answer in done.stdout

    # A second turn of the same Codex session resends the whole history (store: false).
    again = _codex(work, env, "resume", "--last", "Now say goodbye")
    assert again.returncode == 0, again.stdout + again.stderr
    resent = sim.received()[-1]["messages"]
    assert {"role": "assistant", "content": answer} in resent, "turn 1's answer came back as history"
    assert resent[-1]["content"][0]["text"] == "Now say goodbye"
