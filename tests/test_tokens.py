"""The gateway's token count equals what the provider bills, on varied real requests over HTTP.

The provider simulator reports ``prompt_tokens`` from the token sequence it caches; the
gateway counts with its memoised per-text counter. They must agree within 1 % or 5
tokens on requests with tools, multi-part contents, names, tool calls and results, and
on real agent traffic (ToolBench runs, BFCL tool-selection requests).
"""

from __future__ import annotations

from typing import Any

import openai
import pytest

from gateway.tokens import TokenCounter, counter_for, encoding_for_model, is_openai_model, message_pieces
from tests.procs import GatewayHandle
from tests.shared_data import data_rows

WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Weather for a city",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
    },
}
IMAGE = {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}}
HANDMADE: list[dict[str, Any]] = [
    {"messages": [{"role": "user", "content": "hi"}]},
    {"messages": [{"role": "system", "content": "Be terse."}, {"role": "user", "content": "¿Qué hora es en Lima?"}]},
    {"messages": [{"role": "user", "name": "ana_1", "content": "named speaker"}]},
    {"messages": [{"role": "user", "content": [{"type": "text", "text": "What is this? "}, IMAGE, IMAGE]}]},
    {
        "messages": [
            {"role": "developer", "content": [{"type": "text", "text": "part one"}, {"type": "text", "text": " two"}]},
            {"role": "user", "content": "go"},
        ]
    },
    {
        "tools": [WEATHER],
        "messages": [
            {"role": "user", "content": "Weather in Lima and Quito?"},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": "call_a",
                        "type": "function",
                        "function": {"name": "get_weather", "arguments": '{"city":"Lima"}'},
                    },
                    {
                        "id": "call_b",
                        "type": "function",
                        "function": {"name": "get_weather", "arguments": '{"city":"Quito"}'},
                    },
                ],
            },
            {"role": "tool", "tool_call_id": "call_a", "content": "18C cloudy"},
            {"role": "tool", "tool_call_id": "call_b", "content": "14C rain"},
        ],
    },
]


def _real_requests() -> list[dict[str, Any]]:
    rows = data_rows("toolbench.jsonl")
    bfcl = data_rows("bfcl.jsonl")
    rows += bfcl[:: max(1, len(bfcl) // 25)]
    requests = []
    for row in rows:
        messages = row["messages"]
        if row.get("meta", {}).get("last_message_is_ground_truth"):
            messages = messages[:-1]
        requests.append({"messages": messages, "tools": row.get("tools") or None})
    return requests


def _check(client: openai.OpenAI, counter: TokenCounter, request: dict[str, Any]) -> tuple[int, int]:
    tools = request.get("tools")
    kwargs = {"tools": tools} if tools else {}
    answer = client.chat.completions.create(model="gpt-4o-mini", messages=request["messages"], **kwargs)
    return counter.request(request["messages"], tools), answer.usage.prompt_tokens


def test_count_matches_provider_prompt_tokens(passthrough_gateway: GatewayHandle) -> None:
    client = openai.OpenAI(base_url=passthrough_gateway.base_url, api_key="sk-count")
    counter = counter_for(encoding_for_model("gpt-4o-mini"))
    requests = HANDMADE + _real_requests()
    assert len(requests) > 40
    for request in requests:
        ours, billed = _check(client, counter, request)
        assert abs(ours - billed) <= max(5, billed * 0.01), (ours, billed, request["messages"][:1])


@pytest.mark.parametrize(
    ("model", "encoding", "native"),
    [
        ("gpt-4o-mini", "o200k_base", True),
        ("openai/gpt-4.1", "o200k_base", True),
        ("o3-mini", "o200k_base", True),
        ("gpt-4-turbo", "cl100k_base", True),
        ("gpt-3.5-turbo", "cl100k_base", True),
        ("anthropic/claude-3-5-sonnet", "o200k_base", False),
        ("gemini/gemini-1.5-pro", "o200k_base", False),
    ],
)
def test_encoding_per_model_family(model: str, encoding: str, native: bool) -> None:
    assert encoding_for_model(model) == encoding
    assert is_openai_model(model) is native


def test_counting_a_resent_history_only_encodes_what_is_new() -> None:
    counter = TokenCounter("o200k_base")
    history = [{"role": "user", "content": f"message number {i} " * 20} for i in range(50)]
    counter.request(history)
    cached_before = len(counter._cache)
    counter.request([*history, {"role": "user", "content": "one new line"}])
    assert len(counter._cache) == cached_before + 1


def test_a_tool_list_is_counted_once_across_requests(monkeypatch: pytest.MonkeyPatch) -> None:
    """An unchanged tool list is last turn's object (``api.incremental_parse``) and a dozen counts a
    request ask for it: the next request's counter finds its tokens without rendering a tool again."""
    from gateway import tokens

    tools = [
        {"type": "function", "function": {"name": f"tool_{i}", "description": f"does {i}", "parameters": {}}}
        for i in range(5)
    ]
    counter = tokens.TokenCounter()
    first = counter.for_request().tools(tools)
    rendered: list[object] = []
    real = tokens.render_tool
    monkeypatch.setattr(tokens, "render_tool", lambda tool: rendered.append(tool) or real(tool))
    assert counter.for_request().tools(tools) == first
    assert counter.for_request().tool(tools[2]) == counter.tool(tools[2])
    assert rendered == [tools[2]]  # only the plain counter's own count rendered it
    fewer = tools[:3]  # a pruned list: its tools are known, the list is new
    assert counter.for_request().tools(fewer) == TokenCounter().tools(fewer)


@pytest.mark.parametrize("learned", [0.0, 0.5, 1.0])
def test_the_bounds_hold_the_count_between_them_without_encoding(learned: float) -> None:
    """``request_at_least <= request <= request_at_most`` whatever part of the text was counted before, for
    real agent histories (over a chunk long) and text of 1-4 UTF-8 bytes a character; nothing is encoded
    for them, and with every text counted both bounds are the count itself."""
    for run in data_rows("toolbench.jsonl"):
        messages = [*run["messages"] * 3, {"role": "user", "content": "Übersicht 概要 🚢 résumé " * 40}]
        shared = TokenCounter("o200k_base")
        shared.learn(p for m in messages[: int(len(messages) * learned)] for p in _pieces(m))
        counter = shared.for_request()
        encoded = shared._enc.encode
        shared._enc.encode = lambda *a, **k: pytest.fail("a bound encoded text")  # type: ignore[method-assign]
        at_most = counter.request_at_most(tuple(messages), run["tools"])
        at_least = counter.request_at_least(tuple(messages), run["tools"])
        shared._enc.encode = encoded  # type: ignore[method-assign]
        exact = TokenCounter("o200k_base").request(messages, run["tools"])
        assert at_least <= exact <= at_most
        if learned == 1.0:
            counter.request(tuple(messages), run["tools"])  # the tools too
            fresh = shared.for_request()
            assert fresh.request_at_least(tuple(messages), run["tools"]) == exact
            assert fresh.request_at_most(tuple(messages), run["tools"]) == exact


def _pieces(message: dict[str, Any]) -> list[str]:
    return message_pieces(message)[0]
