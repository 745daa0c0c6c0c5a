"""The summariser model fails or times out: the request still succeeds, and no turn is lost.

``policy.compaction.summarizer_model`` names a second configured model served by a second
simulator whose every answer is a fault (a 500, or a hang past the summariser timeout).
A scripted agent conversation runs through the real gateway with the openai SDK until
compaction happens, both ways it can: prepared ahead in the background (the default
``prepare_at``), and on the turn that crosses the threshold (``prepare_at`` equal to the
threshold). Every turn must be answered; every turn the provider saw must carry all the
client's messages or a summary in place of the missing ones, and that summary must be the
extractive one; the store must hold a ``summarizer_failed`` decision naming the failure.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import openai
import pytest

from benchmarks.scripted_agent import TOOLS, scripted_turns
from gateway.store.engine import make_engine
from gateway.store.queries import get_request, list_requests
from tests.procs import SimHandle, run_gateway, run_simulator, sim_models

TURNS = 24
SUMMARIZER = {
    "name": "summarizer",
    "litellm_model": "openai/gpt-4o-mini",
    "context_window": 128000,
}
COMPACTION = {
    "summary_max_tokens": 500,
    "keep_recent_turns": 2,
    "strategies": ["summarize"],
    "summarizer_model": "summarizer",
    "summarizer_timeout_s": 1.0,
}
# (fault queued for every summariser request, compaction overrides, what the failure says, prepared ahead)
CASES = {
    "500-prepared-ahead": ({"kind": "status", "status": 500}, {}, "500", True),
    "hang-on-the-crossing-turn": ({"kind": "hang", "seconds": 3}, {"prepare_at": 0.55}, "timed out", False),
}


@pytest.fixture(scope="module")
def chat_sim(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SimHandle]:
    with run_simulator(tmp_path_factory.mktemp("sim-chat")) as handle:
        yield handle


@pytest.fixture(scope="module")
def summarizer_sim(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SimHandle]:
    with run_simulator(tmp_path_factory.mktemp("sim-summarizer")) as handle:
        yield handle


def _converse(base_url: str, session: str) -> list[list[dict[str, Any]]]:
    """Run the scripted agent; return the history the client sent on each turn."""
    client = openai.OpenAI(base_url=base_url, api_key="sk-client", max_retries=0)
    steps, _ = scripted_turns(turns=TURNS, facts=10)
    messages: list[dict[str, Any]] = []
    sent = []
    for step in steps:
        messages += step
        sent.append(list(messages))
        got = client.chat.completions.create(
            model="small-window", messages=messages, tools=TOOLS, extra_headers={"x-session-id": session}
        )
        assert got.choices[0].message.content.startswith("Simulated answer"), "the turn was answered"
        messages.append({"role": "assistant", "content": got.choices[0].message.content})
        time.sleep(0.1)  # room for a background preparation to finish, as between real turns
    return sent


def _summary(body: dict[str, Any]) -> dict[str, Any] | None:
    found = [m for m in body["messages"] if str(m.get("content") or "").startswith("<summary")]
    assert len(found) <= 1
    return found[0] if found else None


def _stored_decisions(database_url: str) -> list[dict[str, Any]]:
    engine = make_engine(database_url)
    try:
        stored = [get_request(engine, s.request_id) for s in list_requests(engine, limit=1000)]
    finally:
        engine.dispose()
    assert len(stored) == TURNS, "every turn recorded"
    return [d for s in stored if s is not None for d in s.decisions if d["pass"] == "compact_history"]


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_failing_summariser_falls_back_to_the_extractive_summary(
    case: str, chat_sim: SimHandle, summarizer_sim: SimHandle, tmp_path: Path
) -> None:
    fault, overrides, says, ahead = CASES[case]
    chat_sim.reset()
    summarizer_sim.reset()
    summarizer_sim.faults({**fault, "times": 1000})
    database_url = f"sqlite:///{tmp_path / 'store.db'}"
    config = {
        "models": [*sim_models(chat_sim.base_url), {**SUMMARIZER, "api_base": summarizer_sim.base_url}],
        "database_url": database_url,
        "policy": {"compaction": {**COMPACTION, **overrides}},
    }
    with run_gateway(tmp_path, config) as gw:
        sent = _converse(gw.base_url, f"summarizer-{case}")
        assert gw.proc.poll() is None

    assert summarizer_sim.received(), "the configured summariser was asked"
    bodies = chat_sim.received()
    assert len(bodies) == TURNS
    compacted = 0
    for history, body in zip(sent, bodies, strict=True):
        summary = _summary(body)
        if summary is None:
            assert len(body["messages"]) == len(history), "no message left out without a summary"
            continue
        compacted += 1
        assert 'by="extractive"' in summary["content"], "the failed model's summary is never used"
        recalled = [m for m in body["messages"] if str(m.get("content") or "").startswith("<recalled")]
        kept = [m for m in body["messages"] if m is not summary and not any(m is r for r in recalled)]
        assert kept[-4:] == history[-4:], "the recent turns are sent as they are"
        assert len(kept) < len(history), "the summary stands for the messages it replaced"
    assert compacted, f"{TURNS} turns must cross the threshold of the 8,000-token window"

    decisions = _stored_decisions(database_url)
    failed = [d for d in decisions if d["action"] == "summarizer_failed"]
    assert failed, "a summarizer_failed decision is recorded"
    assert all(says in f for d in failed for f in d["detail"]["failures"]), failed
    assert any(d["detail"].get("prepared_ahead", False) == ahead for d in failed), failed
    used = {d["detail"]["summarizer"] for d in decisions if d["action"] in ("compacted", "checkpoint_reused")}
    assert used == {"extractive"}
