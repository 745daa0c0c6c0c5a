"""Summaries end to end: the openai SDK, a real gateway and the provider simulator over HTTP.

With a provider key configured and no ``summarizer_model``, the session's own model
writes the summary (the simulator then receives the summariser's ``<transcript>`` call).
With the default policy and no key, the extractive summary keeps the codes a user stated
among replies that each carry a random id, and a question about an early turn gets that
turn back from the archive (episodic recall is on by default).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import openai
import pytest

from benchmarks.locker_session import FINAL_QUESTION, SYSTEM, codes_present, locker_session
from benchmarks.scripted_agent import TOOLS, scripted_turns
from gateway.providersim.completion import is_summary_request
from tests.procs import GatewayHandle, SimHandle, run_gateway, run_simulator, sim_models

KEY_ENV = "VENTANA_E2E_PROVIDER_KEY"
COMPACTION = {"summary_max_tokens": 500, "keep_recent_turns": 2, "strategies": ["summarize"], "prepare_at": 0.55}


@pytest.fixture(scope="module")
def sim(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SimHandle]:
    with run_simulator(tmp_path_factory.mktemp("sim-summaries")) as handle:
        yield handle


def _gateway(sim: SimHandle, tmp: Path, *, key: bool, policy: dict[str, Any] | None = None) -> Any:
    models = sim_models(sim.base_url, api_key_env=KEY_ENV)
    config = {"models": models, "policy": {"compaction": COMPACTION, **(policy or {})}}
    return run_gateway(tmp, config, env={KEY_ENV: "sk-provider"} if key else None)


def _summaries(body: dict[str, Any]) -> list[str]:
    return [str(m["content"]) for m in body["messages"] if str(m.get("content") or "").startswith("<summary")]


def _converse(gw: GatewayHandle, session: str, turns: int, key: str = "sk-client") -> None:
    client = openai.OpenAI(base_url=gw.base_url, api_key=key, max_retries=0)
    steps, _ = scripted_turns(turns=turns, facts=10)
    messages: list[dict[str, Any]] = []
    for step in steps:
        messages += step
        got = client.chat.completions.create(
            model="small-window", messages=messages, tools=TOOLS, extra_headers={"x-session-id": session}
        )
        messages.append({"role": "assistant", "content": got.choices[0].message.content})


@pytest.mark.parametrize("key", [True, False], ids=["provider-key", "no-key"])
def test_session_model_summarises_only_when_a_provider_key_is_configured(
    sim: SimHandle, tmp_path_factory: pytest.TempPathFactory, key: bool
) -> None:
    sim.reset()
    with _gateway(sim, tmp_path_factory.mktemp("gw-default-summarizer"), key=key) as gw:
        _converse(gw, f"e2e-default-summarizer-{key}", turns=24)
    received = sim.received()
    asked = [b for b in received if is_summary_request(b["messages"])]
    summaries = [s for b in received if not is_summary_request(b["messages"]) for s in _summaries(b)]
    assert summaries, "24 turns cross 55% of the 8,000-token window"
    if key:
        assert asked and all(b["model"] == "gpt-4o-mini" for b in asked), "the session's own model was asked"
        # Which summary wins is summarize_range's fact check (the simulator's terse echo often loses to
        # the extractive one); what this test pins is who is asked.
    else:
        assert not asked, "no key: nothing is sent to a summariser model"
        assert all('by="extractive"' in s for s in summaries)


def test_another_caller_with_the_same_conversation_gets_summaries_made_for_it(
    sim: SimHandle, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """The session's own model summarises by continuing the session's sent request, so a summary is made on
    that caller's prefix: a second caller sending the very same conversation (same session name, same
    messages) has its own summaries made, each billed to it, and never adopts the first caller's."""
    with _gateway(sim, tmp_path_factory.mktemp("gw-two-callers"), key=True) as gw:
        sim.reset()
        _converse(gw, "e2e-same-name", turns=24, key="sk-ana-1")
        first = sum(is_summary_request(b["messages"]) for b in sim.received())
        sim.reset()
        _converse(gw, "e2e-same-name", turns=24, key="sk-bob-1")
        second = sum(is_summary_request(b["messages"]) for b in sim.received())
    assert first > 0, "24 turns cross 55% of the 8,000-token window"
    assert second == first, "the second caller adopted summaries made for the first"


def test_default_policy_keeps_planted_codes_through_compaction_and_recalls_the_turn(
    sim: SimHandle, tmp_path_factory: pytest.TempPathFactory
) -> None:
    users, planted = locker_session(turns=80, codes=16)
    sim.reset()
    config = {"models": sim_models(sim.base_url)}  # the bundled defaults, no provider key
    with run_gateway(tmp_path_factory.mktemp("gw-locker"), config) as gw:
        client = openai.OpenAI(base_url=gw.base_url, api_key="sk-client", max_retries=0)
        messages: list[dict[str, Any]] = [{"role": "system", "content": SYSTEM}]
        for text in [*users, FINAL_QUESTION, "What is the locker code for site 1?"]:
            messages.append({"role": "user", "content": text})
            got = client.chat.completions.create(
                model="small-window", messages=messages, extra_headers={"x-session-id": "e2e-locker"}
            )
            messages.append({"role": "assistant", "content": got.choices[0].message.content})
    bodies = sim.received()
    final, asked = bodies[-2], bodies[-1]
    summaries = _summaries(final)
    assert summaries and 'by="extractive"' in summaries[0], "80 turns cross 55% of the 8,000-token window"
    text = "\n".join(str(m.get("content")) for m in final["messages"])
    assert codes_present(planted, text) == len(planted), "every stated code survives compaction"
    assert "Simulated answer" not in summaries[0], "replies that only label themselves are not kept"
    recalled = [str(m["content"]) for m in asked["messages"] if str(m.get("content")).startswith("<recalled")]
    assert recalled and planted[0].code in recalled[0], "the early turn comes back from the archive"
