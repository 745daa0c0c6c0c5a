"""``ventana replay whatif --policy served`` reproduces the decisions the gateway served, exactly.

A chat runs through ``ventana serve``'s app (in this process; the openai SDK over real HTTP) to
the provider simulator on an 8K window, long enough to compact several times, with the
summary of the next range prepared ahead in the background as the gateway does by default.
Replaying the stored session with the served policy must give the same compactions, on the
same turns, and the same tokens sent per turn: with the extractive summariser, and with a model's
(whose texts the replay cannot write again offline; it reuses the ones the gateway sent).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import openai
import orjson
import pytest
import yaml
from click.testing import CliRunner

from gateway.api.app import create_app
from gateway.cli import main
from gateway.config import parse_settings
from gateway.store.engine import make_engine
from gateway.store.migrate import upgrade
from gateway.store.queries import list_requests
from gateway.store.sql_recorder import SqlRecorder
from tests.inproc import serve_in_thread
from tests.procs import SimHandle, run_simulator

MODEL = "whatif-8k"
SESSION = "served-then-replayed"
TOPICS = ["the kitchen", "the shed", "the loft", "the boiler", "the driveway", "the porch"]


@pytest.fixture(scope="module")
def sim(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SimHandle]:
    with run_simulator(tmp_path_factory.mktemp("whatif-sim")) as handle:
        yield handle


def _chat(base: str, turns: int) -> None:
    client = openai.OpenAI(
        base_url=base + "/v1", api_key="sk-whatif", max_retries=0, default_headers={"X-Session-Id": SESSION}
    )
    messages: list[dict[str, Any]] = [{"role": "system", "content": "You are a building planner."}]
    for k in range(turns):
        note = f"Notes on {TOPICS[k % len(TOPICS)]}, part {k}: budget {1200 + k * 35} euros. " + "Agreed. " * 120
        messages.append({"role": "user", "content": note})
        answer = client.chat.completions.create(model=MODEL, messages=messages)
        messages.append({"role": "assistant", "content": answer.choices[0].message.content or ""})
        time.sleep(0.05)  # as between real turns: a summary prepared ahead has time to finish


@pytest.mark.parametrize("summariser", ["extractive", "llm"])
def test_whatif_served_reproduces_the_served_compactions(sim: SimHandle, tmp_path: Path, summariser: str) -> None:
    url = f"sqlite:///{tmp_path / 'store.db'}"
    upgrade(url)
    config = {
        "models": [
            {"name": MODEL, "litellm_model": "openai/gpt-4o-mini", "api_base": sim.base_url, "context_window": 8_000}
        ],
        "database_url": url,
        "policy": {"memory": {"enabled": False}},
    }
    if summariser == "llm":  # the served gateway summarised with a model (the simulator answers it)
        config["policy"]["compaction"] = {"summarizer_model": MODEL}
    path = tmp_path / "ventana.yaml"
    path.write_text(yaml.safe_dump(config))
    settings = parse_settings(config)
    recorder = SqlRecorder(database_url=url, spool_path=str(tmp_path / "spool.jsonl"))
    with serve_in_thread(create_app(settings, recorder=recorder)) as base:
        _chat(base, 40)
        time.sleep(0.5)  # the recorder writes on its own thread

    engine = make_engine(url)
    rows = sorted(list_requests(engine, session=SESSION, limit=1000), key=lambda r: r.created_at)
    engine.dispose()
    served = [r.compactions for r in rows]
    assert sum(served) >= 2, "the chat must compact more than once to pin anything"

    result = CliRunner().invoke(
        main,
        ["replay", "whatif", "--config", str(path), "--session", SESSION, "--policy", "served", "--format", "json"],
    )
    assert result.exit_code == 0, result.output
    (report,) = orjson.loads(result.stdout)
    replayed = [int(t["compactions"]) for t in report["turns"]]
    # Before: the replay never prepared a summary ahead, so its summaries covered other ranges, it sent other
    # tokens from the first compaction on, and it missed the served session's last compaction.
    assert replayed == served, (replayed, served)
    # Before, with the model's summariser: the replay's extractive summaries sent other bytes from the first
    # compaction on (turn 11: 2,628 tokens where 2,579 were sent).
    assert [int(t["tokens_sent"]) for t in report["turns"]] == [r.tokens_assembled for r in rows]
