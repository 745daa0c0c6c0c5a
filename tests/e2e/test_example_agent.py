"""The README's first command with no key (``ventana serve``) runs the example tool agent end to end."""

from __future__ import annotations

import subprocess
import sys

import pytest
import yaml

from tests.procs import REPO_ROOT, _env, run_gateway


def test_example_tool_agent_runs_against_the_bundled_config_with_no_key(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    config = yaml.safe_load((REPO_ROOT / "config" / "ventana.yaml").read_text())
    assert all("api_base" not in m for m in config["models"]), "the bundled config must fall back to the simulator"
    with run_gateway(tmp_path_factory.mktemp("example"), config) as gw:
        done = subprocess.run(
            [sys.executable, str(REPO_ROOT / "examples" / "tool_agent.py")],
            env=_env({"VENTANA_URL": gw.base_url}),
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert "simulator" in gw.log().lower(), "serve said loudly that it runs on the simulator"
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].startswith("tool call: get_weather({'city': 'Paris'")
    assert lines[1] == "tool call: convert_temperature({'celsius': 18}) -> 64.4 F"
    assert lines[2].startswith("assistant: Simulated answer") and len(lines) == 3
