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

from gateway.store.engine import make_engine
from gateway.store.queries import list_requests
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


#: A gateway model name that is no Claude id: today's Claude Code then sends ``role: "system"``
#: messages inside ``messages`` (and 2.1.197 the ``mid-conversation-system`` beta).
AGENT = "ventana-agent"
#: Small enough that the history of a few turns crosses the compaction threshold (55 %): Claude
#: Code's first request alone is ~17K tokens (system prompt and two dozen tools), and each turn
#: below adds ~4.5K (the file's ~2K tokens written, then read back).
WINDOW = 40_000
_BODY = " ".join(f"line{i:04d}" for i in range(700))
TASKS = [
    (name, f"{marker} {_BODY}")
    for name, marker in (("notes.txt", "ventana-42"), ("second.txt", "ventana-43"), ("third.txt", "ventana-44"))
]


def _claude_bins() -> list[str]:
    """The Claude Code binaries to run: ``claude`` (the suite's pinned one) and any listed in
    ``VENTANA_CLAUDE_BINS`` (colon-separated, e.g. the newest release installed in a scratch prefix)."""
    extra = [b for b in os.environ.get("VENTANA_CLAUDE_BINS", "").split(":") if b]
    return [b for b in (CLAUDE_BIN, *extra) if b]


def _agent_model(kind: str, sim: Any) -> dict[str, Any]:
    if kind == "chat":  # an OpenAI-compatible upstream: Messages crosses to chat and back
        return {
            "name": AGENT,
            "litellm_model": "openai/gpt-4o-mini",
            "api_base": sim.base_url,
            "context_window": WINDOW,
        }
    return {  # an Anthropic upstream: the client's Messages body, forwarded natively
        "name": AGENT,
        "litellm_model": "anthropic/claude-sonnet-4-5",
        "api_base": sim.url,
        "api_key_env": SIM_KEY_ENV,
        "context_window": WINDOW,
    }


def _run_claude(binary: str, home: Path, cwd: Path, base_url: str, prompt: str, *more: str) -> dict[str, Any]:
    env = {**_claude_env(home, base_url), "ANTHROPIC_MODEL": AGENT, "ANTHROPIC_SMALL_FAST_MODEL": AGENT}
    env["ANTHROPIC_DEFAULT_HAIKU_MODEL"] = AGENT
    done = subprocess.run(
        [binary, "-p", prompt, "--output-format", "json", "--allowedTools", "Write Read", *more],
        env=env,
        capture_output=True,
        timeout=180,
        cwd=cwd,
    )
    assert done.returncode == 0, (binary, done.stdout[-2000:], done.stderr[-2000:])
    result: dict[str, Any] = orjson.loads(done.stdout)
    assert result["subtype"] == "success" and result["is_error"] is False, result
    return result


def _has_summary(body: dict[str, Any]) -> bool:
    return "<summary" in orjson.dumps(body.get("messages")).decode()


@pytest.mark.parametrize("kind", ["chat", "messages"])
@pytest.mark.parametrize("binary", _claude_bins())
def test_claude_code_finishes_a_file_task_over_turns_compacted(tmp_path: Path, kind: str, binary: str) -> None:
    """Write a file, read it back, three turns of one session, at a window small enough to compact;
    then a second session in the same folder is a second session."""
    store = f"sqlite:///{tmp_path / 'store.db'}"
    with run_simulator(tmp_path) as sim:
        config = {
            "database_url": store,
            "models": [_agent_model(kind, sim)],
            "policy": {"compaction": {"keep_recent_turns": 1, "summary_max_tokens": 300, "strategies": ["summarize"]}},
        }
        env = {SIM_KEY_ENV: "sk-sim-anthropic", "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
        home, work = tmp_path / "home", tmp_path / "work"
        home.mkdir()
        work.mkdir()
        with run_gateway(tmp_path, config, env=env) as gw:
            results = []
            for turn, (name, content) in enumerate(TASKS):
                more = ("--resume", results[-1]["session_id"]) if turn else ()
                prompt = f"Create the file {name} containing {content}, then read it back"
                results.append(_run_claude(binary, home, work, gw.url, prompt, *more))
            other = _run_claude(
                binary, home, work, gw.url, "Create the file other.txt containing ventana-99, then read it back"
            )
            log = gw.log()
        received: list[dict[str, Any]] = sim.received()
    for (name, content), result in zip(TASKS, results, strict=True):
        assert (work / name).read_text() == content, log[-2000:]
        assert content.split()[0] in result["result"], result["result"]  # read back, through the gateway
    assert (work / "other.txt").read_text() == "ventana-99"
    claude_sessions = {r["session_id"] for r in results}
    assert len(claude_sessions) == 1 and other["session_id"] not in claude_sessions  # --resume: one session
    assert any(_has_summary(b) for b in received), "three turns at a 40K window must compact"
    if kind == "messages":  # the native forward: Claude Code's own fields reach the upstream
        first = received[0]
        assert "thinking" in first and first["model"] == "claude-sonnet-4-5"
    engine = make_engine(store)
    try:
        sessions = {r.session_id for r in list_requests(engine, limit=500)}
    finally:
        engine.dispose()
    assert claude_sessions | {other["session_id"]} <= sessions  # Claude Code's own ids name the sessions
