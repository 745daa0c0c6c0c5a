"""``ventana lint FILE.json``: the same pipeline and gate offline, usable in CI (exit status)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import yaml
from click.testing import CliRunner

from gateway.cli import main

CLOCK_PROMPT = {
    "model": "gpt-4o-mini",
    "max_tokens": 300,
    "messages": [
        {
            "role": "system",
            "content": "Current time: 2026-11-29T10:00:00Z\nYou triage bugs. "
            "<critical>Never close a bug silently.</critical>",
        },
        {"role": "user", "content": "Triage #123"},
    ],
}


def _run(tmp_path: Path, body: Any, *args: str) -> tuple[int, str]:
    path = tmp_path / "request.json"
    path.write_bytes(orjson.dumps(body))
    result = CliRunner().invoke(main, ["lint", str(path), *args])
    return result.exit_code, result.output


def test_raw_request_with_a_clock_fails_and_names_the_checks(tmp_path: Path) -> None:
    code, out = _run(tmp_path, CLOCK_PROMPT, "--no-assembly")
    assert code == 1
    assert "volatile_in_prefix" in out and "critical_rules_at_edges" in out
    assert "Budget: gpt-4o-mini" in out and "reserve" in out and "lint FAILED" in out


def test_assembled_request_passes_and_shows_the_reminder(tmp_path: Path) -> None:
    code, out = _run(tmp_path, CLOCK_PROMPT, "--json")
    assert code == 0, out
    data = orjson.loads(out)
    assert not data["failed"]
    last = data["assembled"]["messages"][-1]["content"]
    assert last.startswith("<reminder>") and "Never close a bug silently." in last
    components = data["budget"]["components"]
    assert components["reserve"]["tokens"] == 300
    assert sum(v["tokens"] for k, v in components.items() if k != "reserve") == data["budget"]["prompt_tokens"]


def test_config_policy_applies_offline(tmp_path: Path) -> None:
    config = tmp_path / "ventana.yaml"
    config.write_text(yaml.safe_dump({"policy": {"volatile": {"enabled": False}}}))
    code, out = _run(tmp_path, CLOCK_PROMPT, "--config", str(config), "--json")
    assert code == 1
    assert {f["detail"]["check"] for f in orjson.loads(out)["findings"]} >= {"volatile_in_prefix"}


def test_a_body_without_messages_is_a_clear_error(tmp_path: Path) -> None:
    code, out = _run(tmp_path, {"model": "gpt-4o-mini"})
    assert code == 1
    assert "messages" in out
