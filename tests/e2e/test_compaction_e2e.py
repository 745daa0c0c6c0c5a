"""Compaction end to end: the openai SDK, a real gateway and the provider simulator over HTTP.

A scripted agent conversation runs against the small-window model (8,000 tokens). The
simulator records every body the gateway forwarded, so the tests read exactly what the
provider saw: the summary appears once the threshold is crossed, no tool call is ever
separated from its result, and the next turn carries the same summary bytes.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import openai
import orjson
import pytest
from prometheus_client.parser import text_string_to_metric_families

from benchmarks.scripted_agent import TOOLS, scripted_turns
from gateway.assembly.verify_assembly import tool_pairing_problems
from gateway.providersim.completion import is_summary_request
from gateway.store.engine import make_engine
from gateway.store.queries import get_request, list_requests
from gateway.tokens import counter_for
from tests.procs import GatewayHandle, SimHandle, run_gateway, run_simulator, sim_models

WINDOW = 8000
THRESHOLD = 0.55
COMPACTION = {"summary_max_tokens": 500, "keep_recent_turns": 2, "strategies": ["summarize"]}


@pytest.fixture(scope="module")
def own_sim(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SimHandle]:
    with run_simulator(tmp_path_factory.mktemp("sim-compaction")) as handle:
        yield handle


def _gateway(sim: SimHandle, tmp: Path, **compaction: Any) -> Any:
    config = {"models": sim_models(sim.base_url), "policy": {"compaction": {**COMPACTION, **compaction}}}
    return run_gateway(tmp, config)


def _summaries(body: dict[str, Any]) -> list[dict[str, Any]]:
    return [m for m in body["messages"] if str(m.get("content") or "").startswith("<summary")]


def _chat_bodies(sim: SimHandle) -> list[dict[str, Any]]:
    """Forwarded chat requests, without the summariser's own requests."""
    return [b for b in sim.received() if not is_summary_request(b["messages"])]


def _converse(gw: GatewayHandle, session: str, turns: int, pause_s: float = 0.0) -> list[Any]:
    client = openai.OpenAI(base_url=gw.base_url, api_key="sk-client")
    steps, _ = scripted_turns(turns=turns, facts=10)
    messages: list[dict[str, Any]] = []
    answers = []
    for step in steps:
        messages += step
        got = client.chat.completions.create(
            model="small-window", messages=messages, tools=TOOLS, extra_headers={"x-session-id": session}
        )
        answers.append(got)
        messages.append({"role": "assistant", "content": got.choices[0].message.content})
        time.sleep(pause_s)
    return answers


def test_compaction_keeps_pairs_and_resends_the_same_summary_bytes(
    own_sim: SimHandle, tmp_path_factory: pytest.TempPathFactory
) -> None:
    own_sim.reset()
    with _gateway(own_sim, tmp_path_factory.mktemp("gw-compaction")) as gw:
        answers = _converse(gw, "e2e-extractive", turns=40)
    bodies = _chat_bodies(own_sim)
    assert len(bodies) == 40
    per_turn = max(counter_for("o200k_base").messages(s) for s in scripted_turns(turns=40, facts=10)[0]) + 40
    for body, answer in zip(bodies, answers, strict=True):
        assert tool_pairing_problems(body["messages"]) == []
        assert answer.usage.prompt_tokens <= THRESHOLD * WINDOW + per_turn
        assert len(_summaries(body)) <= 1
    compacted = [i for i, b in enumerate(bodies) if _summaries(b)]
    assert compacted, "40 turns of ~250 tokens must cross 55% of an 8,000-token window"
    first = compacted[0]
    assert bodies[first]["messages"][:2] == bodies[0]["messages"][:2], "system prompt and goal untouched"
    assert bodies[first]["messages"][2] is not None and _summaries(bodies[first])[0] == bodies[first]["messages"][2]
    reused = [i for i in compacted[1:] if _summaries(bodies[i]) == _summaries(bodies[i - 1])]
    assert reused, "the turn after a compaction sends the stored summary again"
    i = reused[0]
    assert orjson.dumps(bodies[i]["messages"][:3]) == orjson.dumps(bodies[i - 1]["messages"][:3])
    assert answers[i].usage.prompt_tokens_details.cached_tokens > 0, "byte-identical prefix hits the cache"


def test_llm_summary_is_prepared_ahead_so_the_crossing_turn_does_not_summarise(
    own_sim: SimHandle, tmp_path_factory: pytest.TempPathFactory
) -> None:
    own_sim.reset()
    tmp = tmp_path_factory.mktemp("gw-llm")
    with _gateway(own_sim, tmp, summarizer_model="gpt-4o-mini") as gw:
        _converse(gw, "e2e-llm", turns=24, pause_s=0.15)
        counted = _compactions_counted(gw)
    first = _first_compaction(f"sqlite:///{tmp / 'ventana.db'}")  # the gateway's default store, in its folder
    assert first.get("prepared_ahead") is True, f"the crossing turn sent the summary prepared ahead: {first}"
    received = own_sim.received()
    chats = [i for i, b in enumerate(received) if not is_summary_request(b["messages"])]
    summarizer_calls = [i for i, b in enumerate(received) if is_summary_request(b["messages"])]
    assert summarizer_calls, "the configured model was asked for a summary"
    crossing = next(i for i in chats if _summaries(received[i]))
    summary = _summaries(received[crossing])[0]["content"]
    assert 'by="llm:gpt-4o-mini"' in summary
    # Prepared ahead (issue 34: from the turn where two more exchanges like the newest would cross), in the
    # background, so it reaches the provider before the crossing request: once, not again by the crossing turn.
    assert summarizer_calls[0] < crossing, "prepared before the crossing turn"
    assert len([i for i in summarizer_calls if i < crossing]) == 1, "one preparation; the crossing turn made none"
    new_summaries = {_summaries(received[i])[0]["content"] for i in chats if _summaries(received[i])}
    assert counted == len(new_summaries) >= 1, "every summary sent for the first time, prepared or not, counts once"


def _first_compaction(database_url: str) -> dict[str, Any]:
    """The detail of the first ``compact_history`` decision that sent a summary, from the stored records."""
    engine = make_engine(database_url)
    try:
        found = (get_request(engine, s.request_id) for s in list_requests(engine, limit=1_000))
        stored = sorted((r for r in found if r is not None), key=lambda r: r.summary.created_at)
    finally:
        engine.dispose()
    for record in stored:
        for d in record.decisions:
            if d["pass"] == "compact_history" and d["action"] == "compacted":
                return dict(d["detail"])
    raise AssertionError("no stored request compacted")


def _compactions_counted(gw: GatewayHandle) -> float:
    """``ventana_compactions_total`` for the small-window model, from the gateway's own /metrics."""
    for family in text_string_to_metric_families(httpx.get(gw.url + "/metrics", timeout=10).text):
        for sample in family.samples:
            if sample.name == "ventana_compactions_total" and sample.labels.get("model") == "small-window":
                return sample.value
    return 0.0
