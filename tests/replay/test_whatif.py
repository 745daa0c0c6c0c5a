"""What-if replay reproduces the provider's cache accounting and an independent recomputation."""

from __future__ import annotations

from collections.abc import Iterator

import openai
import pytest

from gateway.assembly.policy import Policy
from gateway.providersim.cache import prompt_token_ids
from gateway.replay.transcripts import Conversation
from gateway.replay.whatif import run_whatif
from gateway.tokens import counter_for
from tests.procs import GatewayHandle, run_gateway, run_simulator, sim_models
from tests.scripted import agent_session, client_requests

TURNS = 50


@pytest.fixture(scope="module")
def recorded_session(
    tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[list[dict], list[tuple[int, int]]]]:
    """Drive a 50-turn agent session through a real gateway and simulator; keep what the provider said."""
    tmp = tmp_path_factory.mktemp("replay")
    messages, tools = agent_session(TURNS)
    requests = client_requests(messages, tools, "gpt-4o-mini")
    with run_simulator(tmp) as sim, run_gateway(tmp, {"models": sim_models(sim.base_url)}) as gw:
        usage = _drive(gw, requests)
    yield requests, usage


def _drive(gw: GatewayHandle, requests: list[dict]) -> list[tuple[int, int]]:
    client = openai.OpenAI(base_url=gw.base_url, api_key="sk-replay")
    usage = []
    for body in requests:
        reply = client.chat.completions.create(**body, extra_headers={"X-Session-Id": "replay-50"})
        usage.append((reply.usage.prompt_tokens, reply.usage.prompt_tokens_details.cached_tokens))
    return usage


def _independent_cached(sequences: list[list[int]]) -> list[int]:
    """OpenAI's rule, recomputed naively: longest common prefix with any earlier prompt, 128-token steps."""
    out = []
    for i, seq in enumerate(sequences):
        best = 0
        for prev in sequences[:i]:
            n = 0
            for a, b in zip(seq, prev, strict=False):
                if a != b:
                    break
                n += 1
            best = max(best, n)
        cached = (best // 128) * 128 if len(seq) >= 1024 else 0
        out.append(cached if cached >= 1024 else 0)
    return out


def test_whatif_under_the_live_policy_matches_what_the_provider_reported(recorded_session) -> None:
    requests, usage = recorded_session
    result = run_whatif(
        [Conversation("replay-50", tuple(requests))],
        Policy(),
        model="gpt-4o-mini",
        litellm_model="openai/gpt-4o-mini",
        context_window=128000,
        cache_kind="openai",
    )
    assert len(result.turns) == TURNS
    assert [(t.tokens_sent, t.cached_read) for t in result.turns] == usage


@pytest.mark.parametrize("clock", [True, False])
def test_whatif_without_passes_matches_an_independent_recomputation(clock: bool) -> None:
    messages, tools = agent_session(TURNS)
    requests = client_requests(messages, tools, "gpt-4o-mini", clock=clock)
    result = run_whatif(
        [Conversation("replay-50", tuple(requests))],
        Policy().all_disabled(),
        model="gpt-4o-mini",
        litellm_model="openai/gpt-4o-mini",
        context_window=128000,
        cache_kind="openai",
    )
    counter = counter_for("o200k_base")
    sequences = [prompt_token_ids(counter, r["messages"], r["tools"]) for r in requests]
    expected = _independent_cached(sequences)
    assert [t.tokens_sent for t in result.turns] == [len(s) for s in sequences]
    assert [t.cached_read for t in result.turns] == expected
    prefix_end = counter.tools(tools) + counter.message(requests[0]["messages"][0])
    beyond_system = any(c > prefix_end for c in expected)
    assert beyond_system is not clock, "a clock in the system prompt must stop the cache inside the system prompt"
    totals = result.totals()
    assert totals["tokens_sent"] == totals["tokens_original"]
    assert totals["cost"] == pytest.approx(totals["cost_original"])
