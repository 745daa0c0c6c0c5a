"""find_tools end to end: openai SDK -> gateway -> a replay upstream that asks for the tool it wants.

The upstream (``benchmarks.replay_upstream``) plays a scripted next step: call ``set_timer``.
Pruned for a weather question, ``set_timer`` is not offered, so the upstream calls
``find_tools``; the gateway must answer that itself, grow the set, send again and return
the real call, for plain and streamed requests alike.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import openai
import pytest

from benchmarks.replay_upstream import ReplayUpstream, serve_replay
from tests.assembly.tool_fixtures import catalogue
from tests.procs import GatewayHandle, run_gateway, sim_models
from tests.store.records import recorded

TOOLS = catalogue()
TIMER_CALL = {
    "role": "assistant",
    "content": None,
    "tool_calls": [{"id": "call_t1", "type": "function", "function": {"name": "set_timer", "arguments": "{}"}}],
}
QUESTION = [{"role": "user", "content": "What's the weather forecast in Paris tomorrow?"}]


@pytest.fixture(scope="module")
def replay() -> Iterator[tuple[ReplayUpstream, str]]:
    upstream = ReplayUpstream()
    with serve_replay(upstream) as url:
        yield upstream, url


@pytest.fixture(scope="module")
def database(tmp_path_factory: pytest.TempPathFactory) -> str:
    return f"sqlite:///{tmp_path_factory.mktemp('find-tools-db') / 'store.db'}"


@pytest.fixture(scope="module")
def gateway(
    replay: tuple[ReplayUpstream, str], database: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[GatewayHandle]:
    config = {
        "models": sim_models(replay[1]),
        "database_url": database,
        "policy": {"tools": {"mode": "prune", "max_tools": 3}},
    }
    with run_gateway(tmp_path_factory.mktemp("gw-find-tools"), config) as handle:
        yield handle



def client(gw: GatewayHandle, session: str) -> openai.OpenAI:
    return openai.OpenAI(base_url=gw.base_url, api_key="sk-client", default_headers={"X-Session-Id": session})


def test_find_tools_is_served_by_the_gateway_and_the_real_call_returned(
    gateway: GatewayHandle, replay: tuple[ReplayUpstream, str], database: str
) -> None:
    upstream, _ = replay
    upstream.log.clear()
    upstream.expect(TIMER_CALL, TOOLS)
    raw = client(gateway, "find-plain").chat.completions.with_raw_response.create(
        model="gpt-4o-mini", messages=QUESTION, tools=TOOLS
    )
    got = raw.parse()
    assert [f.kind for f in upstream.log] == ["search", "answer"]
    assert "set_timer" not in upstream.log[0].offered and "find_tools" in upstream.log[0].offered
    assert "set_timer" in upstream.log[1].offered
    calls = got.choices[0].message.tool_calls
    assert [c.function.name for c in calls] == ["set_timer"]
    assert got.usage.prompt_tokens == sum(f.prompt_tokens for f in upstream.log)
    assert got.usage.completion_tokens == 40
    record = recorded(database, raw.headers["x-ventana-request-id"])
    expanded = [d for d in record.decisions if d["pass"] == "find_tools"]
    assert [d["action"] for d in expanded] == ["expanded"] and "set_timer" in expanded[0]["detail"]["added"]
    assert "set_timer" in [t["function"]["name"] for t in record.assembled["tools"]]  # what was sent last

    # the next turn starts from the grown set: set_timer is offered without a search
    upstream.log.clear()
    history: list[dict[str, Any]] = [
        *QUESTION,
        TIMER_CALL,
        {"role": "tool", "tool_call_id": "call_t1", "content": "timer set"},
    ]
    upstream.expect({"role": "assistant", "content": "Timer set."}, TOOLS)
    again = client(gateway, "find-plain").chat.completions.create(model="gpt-4o-mini", messages=history, tools=TOOLS)
    assert again.choices[0].message.content == "Timer set."
    assert [f.kind for f in upstream.log] == ["answer"]
    assert "set_timer" in upstream.log[0].offered


def test_streamed_find_tools_call_never_reaches_the_client(
    gateway: GatewayHandle, replay: tuple[ReplayUpstream, str]
) -> None:
    upstream, _ = replay
    upstream.log.clear()
    upstream.expect(TIMER_CALL, TOOLS)
    stream = client(gateway, "find-stream").chat.completions.create(
        model="gpt-4o-mini", messages=QUESTION, tools=TOOLS, stream=True, stream_options={"include_usage": True}
    )
    names: list[str] = []
    usage = None
    for chunk in stream:
        if chunk.usage is not None:
            usage = chunk.usage
        for choice in chunk.choices:
            for call in choice.delta.tool_calls or ():
                if call.function and call.function.name:
                    names.append(call.function.name)
    assert names == ["set_timer"]
    assert [f.kind for f in upstream.log] == ["search", "answer"]
    assert usage is not None and usage.prompt_tokens == sum(f.prompt_tokens for f in upstream.log)


def test_a_tool_the_search_cannot_find_is_still_reachable(
    gateway: GatewayHandle, replay: tuple[ReplayUpstream, str]
) -> None:
    """A query matching nothing hidden: the request goes out with every tool, never a loss."""
    upstream, _ = replay
    upstream.log.clear()
    odd = [*TOOLS[:-1], {**TOOLS[-1], "function": {**TOOLS[-1]["function"], "description": "zzz"}}]
    upstream.expect(TIMER_CALL, [])
    upstream.descriptions["set_timer"] = "qqq unknown words"
    got = client(gateway, "find-nothing").chat.completions.create(model="gpt-4o-mini", messages=QUESTION, tools=odd)
    assert [c.function.name for c in got.choices[0].message.tool_calls] == ["set_timer"]
    assert [f.kind for f in upstream.log] == ["search", "answer"]
    assert len(upstream.log[1].offered) == len(odd)


def test_the_grown_set_is_the_sessions_next_set_even_when_the_history_never_calls_it(
    gateway: GatewayHandle, replay: tuple[ReplayUpstream, str]
) -> None:
    """The set a search grew is saved to the session's own (caller-scoped) state: the next turn offers
    it without a new search, although nothing in the history calls the tool the search added."""
    upstream, _ = replay
    upstream.log.clear()
    upstream.expect(TIMER_CALL, TOOLS)
    client(gateway, "find-sticky").chat.completions.create(model="gpt-4o-mini", messages=QUESTION, tools=TOOLS)
    assert [f.kind for f in upstream.log] == ["search", "answer"]
    upstream.log.clear()
    upstream.expect({"role": "assistant", "content": "Sunny in Rome too."}, TOOLS)
    history = [*QUESTION, {"role": "assistant", "content": "Sunny."}, {"role": "user", "content": "And in Rome?"}]
    client(gateway, "find-sticky").chat.completions.create(model="gpt-4o-mini", messages=history, tools=TOOLS)
    assert [f.kind for f in upstream.log] == ["answer"]
    assert "set_timer" in upstream.log[0].offered, "the grown set was lost between turns"
