"""A long Responses conversation chained by ``previous_response_id`` is compacted like the chat route's.

The scripted agent conversation (``benchmarks.scripted_agent``) runs turn by turn: each turn
sends only what is new (the user's request, the tool call and its result) and names the
previous response; Ventana rebuilds the conversation from its store. On the small-window
model (8,000 tokens) the assembled prompt crosses the 55 % threshold: the provider must then
see a summary, the next turn the same summary bytes, and the prefix cache must keep hitting.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import openai
import pytest

from benchmarks.scripted_agent import GOAL, SYSTEM, TOOLS, scripted_turns
from gateway.assembly.verify_assembly import tool_pairing_problems
from gateway.providersim.completion import is_summary_request
from tests.procs import SimHandle, run_gateway, run_simulator, sim_models

TURNS = 36
COMPACTION = {"summary_max_tokens": 500, "keep_recent_turns": 2, "strategies": ["summarize"]}
RESPONSE_TOOLS = [{"type": "function", "strict": False, **t["function"]} for t in TOOLS]


@pytest.fixture(scope="module")
def own_sim(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SimHandle]:
    with run_simulator(tmp_path_factory.mktemp("sim-responses-compaction")) as handle:
        yield handle


def as_items(step: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A scripted turn as Responses input items; the system prompt goes to ``instructions``, and the
    scripted assistant reply is left to the model."""
    items: list[dict[str, Any]] = []
    for m in step:
        if m["role"] == "user":
            items.append({"type": "message", "role": "user", "content": m["content"]})
        for call in m.get("tool_calls") or ():
            fn = call["function"]
            items.append(
                {"type": "function_call", "call_id": call["id"], "name": fn["name"], "arguments": fn["arguments"]}
            )
        if m["role"] == "tool":
            items.append({"type": "function_call_output", "call_id": m["tool_call_id"], "output": m["content"]})
    return items


def _summaries(body: dict[str, Any]) -> list[str]:
    return [str(m["content"]) for m in body["messages"] if str(m.get("content") or "").startswith("<summary")]


def test_chained_conversation_is_compacted_and_keeps_hitting_the_cache(
    own_sim: SimHandle, tmp_path_factory: pytest.TempPathFactory
) -> None:
    config = {"models": sim_models(own_sim.base_url), "policy": {"compaction": COMPACTION}}
    steps, _ = scripted_turns(turns=TURNS, facts=10)
    with run_gateway(tmp_path_factory.mktemp("gw-responses-compaction"), config) as gw:
        client = openai.OpenAI(base_url=gw.base_url, api_key="sk-long")
        previous: str | None = None
        answers = []
        for step in steps:
            extra = {"previous_response_id": previous} if previous else {}
            got = client.responses.create(
                model="small-window", instructions=SYSTEM, input=as_items(step), tools=RESPONSE_TOOLS, **extra
            )
            answers.append(got)
            previous = got.id
    bodies = [b for b in own_sim.received() if not is_summary_request(b["messages"])]
    assert len(bodies) == TURNS
    for body in bodies:
        assert tool_pairing_problems(body["messages"]) == []
        assert len(_summaries(body)) <= 1
    compacted = [i for i, b in enumerate(bodies) if _summaries(b)]
    assert compacted, f"{TURNS} chained turns must cross 55% of an 8,000-token window"
    assert bodies[-1]["messages"][0] == {"role": "system", "content": SYSTEM}
    assert bodies[-1]["messages"][1] == {"role": "user", "content": GOAL}, "the task itself is kept"
    reused = [i for i in compacted[1:] if _summaries(bodies[i]) == _summaries(bodies[i - 1])]
    assert reused, "the turn after a compaction sends the stored summary again"
    after = answers[reused[0]].usage
    assert after.input_tokens_details.cached_tokens > 0, "the compacted prefix, resent byte for byte, hits the cache"
    full = sum(len(str(m.get("content"))) for m in bodies[-1]["messages"])
    rebuilt = sum(len(str(i)) for s in steps for i in as_items(s))
    assert full < rebuilt, "the provider saw less than the whole conversation"
