"""Claude Code (``claude -p``) with ``ANTHROPIC_BASE_URL`` at Ventana, offline, the simulator behind it.

Claude Code sets its own ``cache_control`` breakpoints and sends a few dozen tools, so this is
the real test of "client breakpoints kept, never more than 4" and of the Messages stream as a
production client reads it. ``tests/run.sh`` installs it with npm; the test skips only when the
``claude`` binary is absent (npm could not reach its registry).
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import jsonschema
import orjson
import pytest

from tests.e2e.test_messages_sdk import CLAUDE, SIM_KEY_ENV, _breakpoints, claude_models
from tests.formats.anthropic_schema import REQUEST
from tests.procs import run_gateway, run_simulator

#: ``tests/run.sh`` points this at the pinned version (tests/clients.txt); benchmarks/clients_latest.py at the newest.
CLAUDE_BIN = os.environ.get("VENTANA_CLAUDE_BIN") or shutil.which("claude")
pytestmark = pytest.mark.skipif(CLAUDE_BIN is None, reason="Claude Code is not installed (npm unreachable)")


def _claude_env(home: Path, base_url: str) -> dict[str, str]:
    """Only what Claude Code needs: the gateway as its API, one model, and no traffic beyond loopback."""
    return {
        "PATH": os.environ.get("PATH", ""),
        "HOME": str(home),
        "ANTHROPIC_BASE_URL": base_url,
        "ANTHROPIC_API_KEY": "sk-ventana-claude-code",
        "ANTHROPIC_MODEL": CLAUDE,
        "ANTHROPIC_SMALL_FAST_MODEL": CLAUDE,
        "ANTHROPIC_DEFAULT_HAIKU_MODEL": CLAUDE,
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
        "DISABLE_TELEMETRY": "1",
        "DISABLE_AUTOUPDATER": "1",
        "DISABLE_ERROR_REPORTING": "1",
    }


def test_claude_code_runs_through_ventana(tmp_path: Path) -> None:
    assert CLAUDE_BIN is not None
    with run_simulator(tmp_path) as sim:
        config = {"models": claude_models(sim.url)}
        env = {SIM_KEY_ENV: "sk-sim-anthropic", "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
        with run_gateway(tmp_path, config, env=env) as gw:
            home = tmp_path / "home"
            home.mkdir()
            done = subprocess.run(
                [CLAUDE_BIN, "-p", "Say hello to Ventana", "--output-format", "json"],
                env=_claude_env(home, gw.url),
                capture_output=True,
                timeout=240,
                cwd=tmp_path,
            )
            log = gw.log()
        received: list[dict[str, Any]] = sim.received()
    assert done.returncode == 0, (done.stdout[-2000:], done.stderr[-2000:], log[-2000:])
    result = orjson.loads(done.stdout)
    assert result["subtype"] == "success" and result["is_error"] is False
    assert result["result"].startswith("Simulated answer")  # the simulator's answer, through the gateway
    assert received, "Claude Code's request must reach the provider"
    for body in received:
        jsonschema.validate(body, REQUEST)
        assert _breakpoints(body) <= 4
