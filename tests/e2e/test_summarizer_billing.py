"""A summariser model's calls are billed to the request whose compaction made them, and to its session.

A chat through the gateway (in this process, so its Prometheus counters can be read; the openai
SDK over real HTTP) crosses the compaction threshold of an 8K window with ``summarizer_model``
naming a model on a second simulator, and ``prepare_at`` at the threshold, so the crossing turn
calls the summariser itself. What the summariser's provider billed is found independently: its
simulator is reset and sent the same bodies again, cold as the first time, and answers with the
same usage. The crossing turn's record, the metric, the session page and ``ventana logs`` must
state the chat call's usage (as the client got it) plus the summariser's.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest
from prometheus_client import REGISTRY
from rich.console import Console

from gateway.api.app import create_app
from gateway.api.auth import hash_key
from gateway.config import parse_settings
from gateway.store.commands import run_logs
from gateway.store.engine import make_engine
from gateway.store.migrate import upgrade
from gateway.store.queries import get_request
from gateway.store.sql_recorder import SqlRecorder
from tests.inproc import serve_in_thread
from tests.procs import SimHandle, run_simulator

MODEL = "billing-8k"
SUMMARIZER = "billing-summarizer"
ADMIN = "vk-billing-admin"
TOPICS = ["the kitchen renovation", "the garden shed", "the loft insulation", "the new boiler", "the driveway"]


@pytest.fixture(scope="module")
def sims(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[SimHandle, SimHandle]]:
    with (
        run_simulator(tmp_path_factory.mktemp("billing-chat")) as chat,
        run_simulator(tmp_path_factory.mktemp("billing-summarizer")) as summarizer,
    ):
        yield chat, summarizer


def _billed(name: str, model: str, kind: str) -> float:
    return REGISTRY.get_sample_value(name, {"model": model, "kind": kind}) or 0.0


def _replayed_usage(sim: SimHandle, bodies: list[dict[str, Any]]) -> tuple[int, int]:
    """What the summariser's provider billed for ``bodies``, asked again from a reset (cold) simulator."""
    sim.reset()
    prompt = completion = 0
    for body in bodies:
        usage = httpx.post(sim.base_url + "/chat/completions", json=body, timeout=60).json()["usage"]
        prompt += usage["prompt_tokens"]
        completion += usage["completion_tokens"]
    return prompt, completion


def test_summariser_calls_are_billed_to_their_request_and_session(
    sims: tuple[SimHandle, SimHandle], tmp_path: Path
) -> None:
    chat_sim, summarizer_sim = sims
    url = f"sqlite:///{tmp_path / 'store.db'}"
    upgrade(url)
    model = {"litellm_model": "openai/gpt-4o-mini", "context_window": 8_000}
    settings = parse_settings(
        {
            "models": [
                {"name": MODEL, "api_base": chat_sim.base_url, **model},
                {"name": SUMMARIZER, "api_base": summarizer_sim.base_url, **model},
            ],
            "database_url": url,
            "auth": {"admin_keys": [hash_key(ADMIN)]},
            "policy": {
                "compaction": {"summarizer_model": SUMMARIZER, "prepare_at": 0.55, "threshold": 0.55},
                "memory": {"enabled": False},
            },
        }
    )
    chat_sim.reset()
    summarizer_sim.reset()
    prompt0 = _billed("ventana_billed_tokens_total", MODEL, "prompt")
    completion0 = _billed("ventana_billed_tokens_total", MODEL, "completion")
    recorder = SqlRecorder(database_url=url, spool_path=str(tmp_path / "spool.jsonl"))
    client_usage: dict[str, tuple[int, int]] = {}
    with serve_in_thread(create_app(settings, recorder=recorder)) as base:
        client = openai.OpenAI(
            base_url=base + "/v1", api_key="sk-billing", max_retries=0, default_headers={"X-Session-Id": "billed"}
        )
        messages: list[dict[str, Any]] = [{"role": "system", "content": "You are a building planner."}]
        for k in range(12):
            topic = TOPICS[k % len(TOPICS)]
            note = f"Notes on {topic}, part {k}: budget {1200 + k * 35} euros, " + "measured and agreed. " * 90
            messages.append({"role": "user", "content": note})
            raw = client.chat.completions.with_raw_response.create(model=MODEL, messages=messages)
            answer = raw.parse()
            assert answer.usage is not None
            client_usage[raw.headers["x-ventana-request-id"]] = (
                answer.usage.prompt_tokens,
                answer.usage.completion_tokens,
            )
            messages.append({"role": "assistant", "content": answer.choices[0].message.content or ""})
            if summarizer_sim.received():
                break
        time.sleep(0.5)  # the recorder writes on its own thread
        headers = {"authorization": f"Bearer {ADMIN}"}
        first = next(iter(client_usage))
        page = httpx.get(base + f"/ui/requests/{first}", headers=headers).text
        caller = page.split("?caller=", 1)[1].split('"', 1)[0]
        session_page = httpx.get(base + f"/ui/sessions/billed?caller={caller}", headers=headers).text

    summarised = summarizer_sim.received()
    assert summarised, "the conversation never crossed the threshold: the test pins nothing"
    crossing = list(client_usage)[-1]
    s_prompt, s_completion = _replayed_usage(summarizer_sim, summarised)
    assert s_prompt > 0 and s_completion > 0

    engine = make_engine(url)
    stored = {i: get_request(engine, i) for i in client_usage}
    record = stored[crossing]
    assert record is not None
    prompt, completion = client_usage[crossing]
    # Before: the record held the chat call's usage only, and one upstream call.
    assert (record.summary.prompt_tokens, record.summary.completion_tokens) == (
        prompt + s_prompt,
        completion + s_completion,
    )
    assert record.summary.upstream_calls == 1 + len(summarised)
    billed = [d for d in record.decisions if d["pass"] == "summarizer" and d["action"] == "billed"]
    assert billed and billed[0]["detail"]["billed"]["prompt_tokens"] == s_prompt
    for request_id, (p, c) in client_usage.items():  # the turns that made no summariser call: as the client got
        found = stored[request_id]
        assert found is not None
        if request_id != crossing:
            assert (found.summary.prompt_tokens, found.summary.completion_tokens) == (p, c)

    total_prompt = sum(p for p, _ in client_usage.values()) + s_prompt
    total_completion = sum(c for _, c in client_usage.values()) + s_completion
    assert _billed("ventana_billed_tokens_total", MODEL, "prompt") - prompt0 == total_prompt
    assert _billed("ventana_billed_tokens_total", MODEL, "completion") - completion0 == total_completion
    assert f'id="total-prompt">{total_prompt:,}<' in session_page
    console = Console(record=True, width=400)
    run_logs(settings, console, session="billed", since=None, limit=100, as_json=False)
    assert f"prompt {total_prompt:,} " in console.export_text()
