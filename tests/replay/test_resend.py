"""Replay from the store: re-send a logged context, and what-if over a logged session."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import openai
import orjson
import pytest
import yaml
from sqlalchemy import select

from gateway.store.engine import make_engine
from gateway.store.models import Request
from gateway.store.queries import list_requests
from tests.procs import REPO_ROOT, _env, run_gateway, run_simulator, sim_models

SESSION = "replay-from-store"


@pytest.fixture(scope="module")
def logged(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, str, list[int]]]:
    tmp = tmp_path_factory.mktemp("resend")
    with run_simulator(tmp) as sim:
        config = {"database_url": f"sqlite:///{tmp / 'store.db'}", "models": sim_models(sim.base_url)}
        with run_gateway(tmp, config) as gw:
            client = openai.OpenAI(base_url=gw.base_url, api_key="sk-user")
            messages = [{"role": "system", "content": "You are terse. " + "Policy line. " * 200}]
            prompt_tokens = []
            for question in ("What is Ventana?", "And the cache?", "Thanks!"):
                messages.append({"role": "user", "content": question})
                reply = client.chat.completions.create(
                    model="gpt-4o-mini", messages=messages, extra_headers={"X-Session-Id": SESSION}
                )
                prompt_tokens.append(reply.usage.prompt_tokens)
                messages.append({"role": "assistant", "content": reply.choices[0].message.content})
        engine = make_engine(config["database_url"])
        deadline = time.monotonic() + 20
        while len(list_requests(engine, session=SESSION)) < 3 and time.monotonic() < deadline:
            time.sleep(0.2)
        engine.dispose()
        path = tmp / "replay.yaml"
        path.write_text(yaml.safe_dump(config))
        yield path, config["database_url"], prompt_tokens


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "gateway.cli", *args],
        capture_output=True,
        text=True,
        env=_env(),
        cwd=REPO_ROOT,
        timeout=120,
        check=False,
    )


def test_send_records_a_linked_request_and_shows_both_answers(logged) -> None:
    config, url, _ = logged
    engine = make_engine(url)
    original = list_requests(engine, session=SESSION)[-1]
    done = _cli("replay", "send", original.request_id, "--config", str(config), "--model", "small-window")
    assert done.returncode == 0, done.stderr
    assert f"replay of {original.request_id}" in done.stdout
    assert "Simulated answer" in done.stdout
    with engine.connect() as conn:
        rows = conn.execute(
            select(Request.request_id, Request.model, Request.replay_of).where(Request.replay_of == original.request_id)
        ).all()
    engine.dispose()
    assert len(rows) == 1 and rows[0].model == "small-window"
    assert f"recorded as {rows[0].request_id}" in done.stdout


def test_send_of_an_unknown_request_is_a_clear_error(logged) -> None:
    config, _, _ = logged
    done = _cli("replay", "send", "req-does-not-exist", "--config", str(config))
    assert done.returncode == 1
    assert "no request 'req-does-not-exist'" in done.stderr


def test_whatif_over_a_logged_session_reproduces_its_prompts(logged) -> None:
    config, _, prompt_tokens = logged
    done = _cli(
        "replay",
        "whatif",
        "--session",
        SESSION,
        "--config",
        str(config),
        "--policy",
        "default",
        "--policy",
        "off",
        "--format",
        "json",
    )
    assert done.returncode == 0, done.stderr
    results = orjson.loads(done.stdout)
    assert [r["policy"] for r in results] == ["default", "off"]
    assert [t["tokens_sent"] for t in results[0]["turns"]] == prompt_tokens
    assert results[1]["totals"]["tokens_sent"] == results[1]["totals"]["tokens_original"]


def test_whatif_needs_exactly_one_source(logged) -> None:
    config, _, _ = logged
    done = _cli("replay", "whatif", "--config", str(config))
    assert done.returncode == 1
    assert "exactly one of --transcript" in done.stderr
