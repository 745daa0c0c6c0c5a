"""The simulator behaves like a model: tools under auto, structured output, n, logprobs, token caps.

Every request goes over real HTTP with the official SDK, through a gateway (forwarding
unchanged, and with the bundled policy) to the simulator process.
"""

from __future__ import annotations

import json
from typing import Any

import openai
import pydantic
import pytest

from tests.procs import GatewayHandle

MODEL = "gpt-4o-mini"
TOOLS: list[dict[str, Any]] = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": "Current weather for a city, with the temperature in celsius",
            "parameters": {
                "type": "object",
                "properties": {
                    "city": {"type": "string"},
                    "unit": {"type": "string", "enum": ["metric", "imperial"]},
                },
                "required": ["city", "unit"],
            },
        },
    },
    {
        "type": "function",
        "function": {
            "name": "convert_temperature",
            "description": "Convert a temperature from celsius to fahrenheit",
            "parameters": {
                "type": "object",
                "properties": {"celsius": {"type": "number"}},
                "required": ["celsius"],
            },
        },
    },
    {
        "type": "function",
        "function": {
            "name": "send_email",
            "description": "Send an email message to a recipient",
            "parameters": {"type": "object", "properties": {"to": {"type": "string"}}, "required": ["to"]},
        },
    },
]
TASK = "Look up the weather for city: Paris in imperial units, then convert the temperature to fahrenheit."


@pytest.fixture(params=["passthrough", "bundled policy"])
def client(request: pytest.FixtureRequest) -> openai.OpenAI:
    """The SDK through a gateway that forwards unchanged, and through one with every pass on."""
    name = "passthrough_gateway" if request.param == "passthrough" else "default_gateway"
    gateway: GatewayHandle = request.getfixturevalue(name)
    return openai.OpenAI(base_url=gateway.base_url, api_key="sk-client", max_retries=0)


def _tool_turn(messages: list[dict[str, Any]], message: Any, results: dict[str, str]) -> None:
    messages.append(message.model_dump(exclude_none=True))
    for call in message.tool_calls:
        messages.append({"role": "tool", "tool_call_id": call.id, "content": results[call.function.name]})


def test_auto_runs_the_steps_in_order_with_arguments_from_the_conversation_then_stops(client: openai.OpenAI) -> None:
    messages: list[dict[str, Any]] = [{"role": "user", "content": TASK}]
    results = {"get_weather": '{"city": "Paris", "celsius": 18, "sky": "cloudy"}', "convert_temperature": "64.4 F"}
    called: list[tuple[str, dict[str, Any]]] = []
    for _ in range(6):
        got = client.chat.completions.create(model=MODEL, messages=messages, tools=TOOLS, parallel_tool_calls=False)
        choice = got.choices[0]
        if choice.finish_reason == "stop":
            break
        assert choice.finish_reason == "tool_calls" and len(choice.message.tool_calls) == 1
        called += [(c.function.name, json.loads(c.function.arguments)) for c in choice.message.tool_calls]
        _tool_turn(messages, choice.message, results)
    assert called == [
        ("get_weather", {"city": "Paris", "unit": "imperial"}),
        ("convert_temperature", {"celsius": 18}),
    ]
    assert choice.finish_reason == "stop" and (choice.message.content or "").startswith("Simulated answer")
    assert messages[-1]["content"] == "64.4 F", "the text answer came after the second result"


def test_auto_calls_two_matching_tools_in_parallel(client: openai.OpenAI) -> None:
    got = client.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": TASK}], tools=TOOLS)
    calls = got.choices[0].message.tool_calls or []
    assert [c.function.name for c in calls] == ["get_weather", "convert_temperature"]
    assert len({c.id for c in calls}) == 2


def test_auto_answers_in_text_when_no_tool_fits(client: openai.OpenAI) -> None:
    messages = [{"role": "user", "content": "Good morning! How are you doing today?"}]
    got = client.chat.completions.create(model=MODEL, messages=messages, tools=TOOLS)
    assert got.choices[0].finish_reason == "stop" and got.choices[0].message.tool_calls is None


def test_required_picks_the_matching_tool_and_the_loop_ends_once_choice_is_reset(client: openai.OpenAI) -> None:
    messages: list[dict[str, Any]] = [{"role": "user", "content": "Please email the report to ana@example.com"}]
    got = client.chat.completions.create(model=MODEL, messages=messages, tools=TOOLS, tool_choice="required")
    assert [c.function.name for c in got.choices[0].message.tool_calls or []] == ["send_email"]
    _tool_turn(messages, got.choices[0].message, {"send_email": "sent"})
    again = client.chat.completions.create(model=MODEL, messages=messages, tools=TOOLS, tool_choice="required")
    assert again.choices[0].finish_reason == "tool_calls", "required means a call, every time"
    done = client.chat.completions.create(model=MODEL, messages=messages, tools=TOOLS, tool_choice="auto")
    assert done.choices[0].finish_reason == "stop"


class Person(pydantic.BaseModel):
    name: str
    age: int
    city: str
    role: str = pydantic.Field(json_schema_extra={"enum": ["admin", "viewer"]})
    tags: list[str]


class Roster(pydantic.BaseModel):
    team: str
    lead: Person
    backup: Person | None


def test_parse_with_a_pydantic_model_fills_it_from_the_conversation(client: openai.OpenAI) -> None:
    text = "Our team is called team: Falcons. The lead has name: Ana, age: 31, city: Lima and is a viewer."
    got = client.chat.completions.parse(
        model=MODEL, messages=[{"role": "user", "content": text}], response_format=Roster
    )
    roster = got.choices[0].message.parsed
    assert isinstance(roster, Roster)
    assert (roster.team, roster.lead.name, roster.lead.age, roster.lead.city) == ("Falcons", "Ana", 31, "Lima")
    assert roster.lead.role == "viewer"


def test_json_object_is_valid_json(client: openai.OpenAI) -> None:
    got = client.chat.completions.create(
        model=MODEL,
        messages=[{"role": "user", "content": "Reply in JSON please"}],
        response_format={"type": "json_object"},
    )
    assert isinstance(json.loads(got.choices[0].message.content or ""), dict)


def test_n_gives_that_many_distinct_choices(client: openai.OpenAI) -> None:
    got = client.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "Name a colour"}], n=3)
    assert [c.index for c in got.choices] == [0, 1, 2]
    assert len({c.message.content for c in got.choices}) == 3
    streamed = client.chat.completions.create(
        model=MODEL, messages=[{"role": "user", "content": "Name a colour"}], n=3, stream=True
    )
    texts = ["", "", ""]
    for chunk in streamed:
        for c in chunk.choices:
            texts[c.index] += c.delta.content or ""
    assert texts == [c.message.content for c in got.choices]


def test_logprobs_cover_every_token_with_the_asked_alternatives(client: openai.OpenAI) -> None:
    got = client.chat.completions.create(
        model=MODEL, messages=[{"role": "user", "content": "Say something"}], logprobs=True, top_logprobs=3
    )
    content = got.choices[0].logprobs.content
    assert "".join(t.token for t in content) == got.choices[0].message.content
    assert len(content) == got.usage.completion_tokens
    for t in content:
        assert t.logprob <= 0 and bytes(t.bytes).decode() == t.token
        assert len(t.top_logprobs) == 3 and t.top_logprobs[0].token == t.token
        assert [a.logprob for a in t.top_logprobs] == sorted((a.logprob for a in t.top_logprobs), reverse=True)
    plain = client.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "Say something"}])
    assert plain.choices[0].logprobs is None


def test_max_completion_tokens_caps_the_answer(client: openai.OpenAI) -> None:
    messages = [{"role": "user", "content": "Write a long answer about the sea and the wind"}]
    full = client.chat.completions.create(model=MODEL, messages=messages)
    capped = client.chat.completions.create(model=MODEL, messages=messages, max_completion_tokens=4, logprobs=True)
    assert capped.choices[0].finish_reason == "length"
    assert capped.usage.completion_tokens == 4 == len(capped.choices[0].logprobs.content)
    assert (full.choices[0].message.content or "").startswith(capped.choices[0].message.content or "-")


def test_stream_carries_the_same_calls_and_logprobs(client: openai.OpenAI) -> None:
    messages = [{"role": "user", "content": TASK}]
    whole = client.chat.completions.create(model=MODEL, messages=messages, tools=TOOLS)
    calls: dict[int, dict[str, str]] = {}
    finish = None
    for chunk in client.chat.completions.create(model=MODEL, messages=messages, tools=TOOLS, stream=True):
        for c in chunk.choices:
            finish = c.finish_reason or finish
            for d in c.delta.tool_calls or []:
                slot = calls.setdefault(d.index, {"name": "", "arguments": ""})
                slot["name"] += d.function.name or ""
                slot["arguments"] += d.function.arguments or ""
    assert finish == "tool_calls"
    assert [calls[i] for i in sorted(calls)] == [
        {"name": c.function.name, "arguments": c.function.arguments} for c in whole.choices[0].message.tool_calls or []
    ]
    tokens = []
    plain = [{"role": "user", "content": "Say something"}]
    for chunk in client.chat.completions.create(model=MODEL, messages=plain, logprobs=True, stream=True):
        for c in chunk.choices:
            tokens += [t.token for t in (c.logprobs.content if c.logprobs else None) or []]
    direct = client.chat.completions.create(model=MODEL, messages=plain, logprobs=True)
    assert tokens == [t.token for t in direct.choices[0].logprobs.content]
