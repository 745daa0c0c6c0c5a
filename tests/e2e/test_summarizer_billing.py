"""A summariser model's calls are billed to the request whose compaction made them, and to its session.

A chat through the gateway (in this process, so its Prometheus counters can be read; the openai
SDK over real HTTP) crosses the compaction threshold of an 8K window with ``summarizer_model``
naming a model on a second simulator: with ``prepare_at`` at the threshold, the crossing turn calls
the summariser itself; by default the summary is prepared ahead in the background, after the
request that started it was answered, and its bill goes to the session's next request. What the
summariser's provider billed is found independently: its
simulator is reset and sent the same bodies again, cold as the first time, and answers with the
same usage. Each record, the metric, the session page and ``ventana logs`` must state the chat
calls' usage (as the client got it) plus the summariser's, each call billed once.
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


def _bills(decisions: list[dict[str, Any]]) -> tuple[int, int]:
    billed = [d["detail"]["billed"] for d in decisions if d["pass"] == "summarizer" and d["action"] == "billed"]
    return sum(b["prompt_tokens"] for b in billed), sum(b["completion_tokens"] for b in billed)


#: compaction overrides, and whether the crossing turn itself calls the summariser
CASES = {
    "on-the-crossing-turn": ({"prepare_at": 0.55, "threshold": 0.55}, True),
    "prepared-ahead": ({"threshold": 0.55}, False),  # the default: in the background, owed to the next request
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_summariser_calls_are_billed_to_their_request_and_session(
    case: str, sims: tuple[SimHandle, SimHandle], tmp_path: Path
) -> None:
    overrides, inline = CASES[case]
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
            "policy": {"compaction": {"summarizer_model": SUMMARIZER, **overrides}, "memory": {"enabled": False}},
        }
    )
    chat_sim.reset()
    summarizer_sim.reset()
    session = f"billed-{case}"
    prompt0 = _billed("ventana_billed_tokens_total", MODEL, "prompt")
    completion0 = _billed("ventana_billed_tokens_total", MODEL, "completion")
    s_prompt0 = _billed("ventana_billed_tokens_total", SUMMARIZER, "prompt")
    s_completion0 = _billed("ventana_billed_tokens_total", SUMMARIZER, "completion")
    recorder = SqlRecorder(database_url=url, spool_path=str(tmp_path / "spool.jsonl"))
    client_usage: dict[str, tuple[int, int]] = {}
    with serve_in_thread(create_app(settings, recorder=recorder)) as base:
        client = openai.OpenAI(
            base_url=base + "/v1", api_key="sk-billing", max_retries=0, default_headers={"X-Session-Id": session}
        )
        messages: list[dict[str, Any]] = [{"role": "system", "content": "You are a building planner."}]
        asked = 0
        for k in range(16):
            if asked and (inline or k > asked):  # prepared ahead: one more turn reports what it was billed
                break
            if summarizer_sim.received() and not asked:
                asked = k
                time.sleep(1.0)  # a summary prepared ahead finishes, as between real turns
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
            if inline and summarizer_sim.received():
                break
        time.sleep(0.5)  # the recorder writes on its own thread
        headers = {"authorization": f"Bearer {ADMIN}"}
        first = next(iter(client_usage))
        page = httpx.get(base + f"/ui/requests/{first}", headers=headers).text
        caller = page.split("?caller=", 1)[1].split('"', 1)[0]
        session_page = httpx.get(base + f"/ui/sessions/{session}?caller={caller}", headers=headers).text

    summarised = summarizer_sim.received()
    assert summarised, "the conversation never crossed the threshold: the test pins nothing"
    s_prompt, s_completion = _replayed_usage(summarizer_sim, summarised)
    assert s_prompt > 0 and s_completion > 0

    engine = make_engine(url)
    stored = {i: get_request(engine, i) for i in client_usage}
    billed_total = (0, 0)
    for request_id, (p, c) in client_usage.items():  # each record: what its client got, plus its bills
        found = stored[request_id]
        assert found is not None
        bp, bc = _bills(found.decisions)
        billed_total = (billed_total[0] + bp, billed_total[1] + bc)
        assert (found.summary.prompt_tokens, found.summary.completion_tokens) == (p + bp, c + bc)
        calls = sum(d["detail"]["calls"] for d in found.decisions if d["pass"] == "summarizer")
        assert found.summary.upstream_calls == 1 + calls
    # Before: no record held a summariser call's usage.
    assert billed_total == (s_prompt, s_completion), "every summariser call is billed to one request"
    if inline:
        crossing = stored[list(client_usage)[-1]]
        assert crossing is not None and _bills(crossing.decisions) == (s_prompt, s_completion)

    total_prompt = sum(p for p, _ in client_usage.values()) + s_prompt
    total_completion = sum(c for _, c in client_usage.values()) + s_completion
    # The metric counts the summariser's calls under its own model, so a dashboard prices them at its prices.
    assert _billed("ventana_billed_tokens_total", MODEL, "prompt") - prompt0 == total_prompt - s_prompt
    assert _billed("ventana_billed_tokens_total", MODEL, "completion") - completion0 == total_completion - s_completion
    assert _billed("ventana_billed_tokens_total", SUMMARIZER, "prompt") - s_prompt0 == s_prompt
    assert _billed("ventana_billed_tokens_total", SUMMARIZER, "completion") - s_completion0 == s_completion
    assert f'id="total-prompt">{total_prompt:,}<' in session_page
    console = Console(record=True, width=400)
    run_logs(settings, console, session=session, since=None, limit=100, as_json=False)
    assert f"prompt {total_prompt:,} " in console.export_text()
