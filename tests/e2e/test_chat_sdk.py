"""The official openai SDK, pointed at the gateway over real HTTP, keeps working unchanged."""

from __future__ import annotations

import httpx
import openai
import pytest

from tests.procs import GatewayHandle, SimHandle

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": "Current weather for a city",
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
        },
    }
]


def _direct(sim: SimHandle, body: dict) -> dict:
    return httpx.post(sim.base_url + "/chat/completions", json=body, timeout=10).json()


def test_plain_completion_equals_what_the_provider_sent(passthrough_gateway: GatewayHandle, sim: SimHandle) -> None:
    client = openai.OpenAI(base_url=passthrough_gateway.base_url, api_key="sk-client")
    messages = [{"role": "system", "content": "You are terse."}, {"role": "user", "content": "Say hi"}]
    got = client.chat.completions.create(model="gpt-4o-mini", messages=messages)
    forwarded = sim.received()[-1]
    direct = _direct(sim, forwarded)
    assert got.choices[0].message.content == direct["choices"][0]["message"]["content"]
    assert got.choices[0].finish_reason == direct["choices"][0]["finish_reason"]
    assert got.usage.prompt_tokens == direct["usage"]["prompt_tokens"]
    assert got.usage.prompt_tokens_details.cached_tokens == 0


def test_stream_is_relayed_chunk_by_chunk_and_ends(passthrough_gateway: GatewayHandle, sim: SimHandle) -> None:
    client = openai.OpenAI(base_url=passthrough_gateway.base_url, api_key="sk-client")
    messages = [{"role": "user", "content": "Stream me a short answer please"}]
    chunks = list(client.chat.completions.create(model="gpt-4o-mini", messages=messages, stream=True))
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    direct = _direct(sim, {**sim.received()[-1], "stream": False})
    assert text == direct["choices"][0]["message"]["content"]
    assert len(chunks) > 3
    assert chunks[-1].choices[0].finish_reason == "stop"
    assert all(c.usage is None for c in chunks), "usage chunk sent although the client did not ask"
    assert sim.received()[-1]["stream_options"] == {"include_usage": True}


def test_usage_chunk_reaches_the_client_only_when_asked(passthrough_gateway: GatewayHandle) -> None:
    client = openai.OpenAI(base_url=passthrough_gateway.base_url, api_key="sk-client")
    chunks = list(
        client.chat.completions.create(
            model="gpt-4o-mini",
            messages=[{"role": "user", "content": "count my tokens"}],
            stream=True,
            stream_options={"include_usage": True},
        )
    )
    assert chunks[-1].choices == []
    assert chunks[-1].usage.prompt_tokens > 0
    assert chunks[-1].usage.prompt_tokens_details.cached_tokens == 0


async def test_async_stream_with_forced_tool_call(passthrough_gateway: GatewayHandle) -> None:
    client = openai.AsyncOpenAI(base_url=passthrough_gateway.base_url, api_key="sk-client")
    stream = await client.chat.completions.create(
        model="gpt-4o-mini",
        messages=[{"role": "user", "content": "Weather in Lima?"}],
        tools=TOOLS,
        tool_choice={"type": "function", "function": {"name": "get_weather"}},
        stream=True,
    )
    calls = [c.choices[0].delta.tool_calls async for c in stream if c.choices and c.choices[0].delta.tool_calls]
    assert calls[0][0].function.name == "get_weather"
    assert calls[0][0].function.arguments == '{"city":"example"}'
    await client.close()


async def test_async_plain_completion_with_tools(passthrough_gateway: GatewayHandle) -> None:
    client = openai.AsyncOpenAI(base_url=passthrough_gateway.base_url, api_key="sk-client")
    got = await client.chat.completions.create(
        model="gpt-4o-mini", messages=[{"role": "user", "content": "Weather?"}], tools=TOOLS, tool_choice="required"
    )
    assert got.choices[0].finish_reason == "tool_calls"
    assert got.choices[0].message.tool_calls[0].function.name == "get_weather"
    await client.close()


def test_parameters_and_unknown_fields_pass_through_untouched(
    passthrough_gateway: GatewayHandle, sim: SimHandle
) -> None:
    client = openai.OpenAI(base_url=passthrough_gateway.base_url, api_key="sk-client")
    messages = [
        {"role": "user", "content": "What is the weather?"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "get_weather", "arguments": '{"city": "Lima"}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "call_1", "content": "18C, cloudy"},
    ]
    client.chat.completions.create(
        model="gpt-4o-mini",
        messages=messages,
        tools=TOOLS,
        tool_choice="auto",
        response_format={"type": "json_object"},
        max_tokens=50,
        max_completion_tokens=60,
        temperature=0.2,
        stop=["END"],
        seed=7,
        user="user-42",
        metadata={"team": "search"},
        extra_body={"my_vendor_field": {"nested": [1, 2, 3]}},
    )
    forwarded = sim.received()[-1]
    assert forwarded["messages"] == messages
    assert forwarded["tools"] == TOOLS
    for key, value in {
        "tool_choice": "auto",
        "response_format": {"type": "json_object"},
        "max_tokens": 50,
        "max_completion_tokens": 60,
        "temperature": 0.2,
        "stop": ["END"],
        "seed": 7,
        "user": "user-42",
        "metadata": {"team": "search"},
        "my_vendor_field": {"nested": [1, 2, 3]},
    }.items():
        assert forwarded[key] == value, key


def test_headers_name_the_request_and_echo_the_session(passthrough_gateway: GatewayHandle) -> None:
    r = httpx.post(
        passthrough_gateway.base_url + "/chat/completions",
        json={"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "hi"}]},
        headers={"X-Session-Id": "conv-123"},
    )
    assert r.status_code == 200
    assert r.headers["x-ventana-request-id"].startswith("req-")
    assert r.headers["x-ventana-session-id"] == "conv-123"


def test_models_health_ready_and_metrics_routes(passthrough_gateway: GatewayHandle) -> None:
    client = openai.OpenAI(base_url=passthrough_gateway.base_url, api_key="sk-client")
    assert [m.id for m in client.models.list()] == ["gpt-4o-mini", "small-window"]
    assert client.models.retrieve("gpt-4o-mini").id == "gpt-4o-mini"
    assert httpx.get(passthrough_gateway.url + "/healthz").json() == {"status": "ok"}
    assert httpx.get(passthrough_gateway.url + "/readyz").status_code == 200
    metrics = httpx.get(passthrough_gateway.url + "/metrics").text
    assert "ventana_requests_total" in metrics


def test_unknown_model_is_a_404_the_sdk_understands(passthrough_gateway: GatewayHandle) -> None:
    client = openai.OpenAI(base_url=passthrough_gateway.base_url, api_key="sk-client")
    with pytest.raises(openai.NotFoundError) as info:
        client.chat.completions.create(model="gpt-9", messages=[{"role": "user", "content": "hi"}])
    assert info.value.body["code"] == "model_not_found"
    assert "gpt-9" in info.value.body["message"]
