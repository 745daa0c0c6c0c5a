"""The official openai SDK's Responses client, pointed at the gateway, works against a chat-only provider."""

from __future__ import annotations

import httpx
import openai
import pytest

from gateway.store.engine import make_engine
from gateway.store.queries import get_request
from tests.procs import GatewayHandle, SimHandle, run_gateway, sim_models

TOOLS = [
    {
        "type": "function",
        "name": "get_weather",
        "description": "Current weather for a city",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
    }
]


def _client(gw: GatewayHandle, key: str = "sk-client") -> openai.OpenAI:
    return openai.OpenAI(base_url=gw.base_url, api_key=key)


def _direct(sim: SimHandle, body: dict) -> dict:
    return httpx.post(sim.base_url + "/chat/completions", json={**body, "stream": False}, timeout=10).json()


def test_create_answers_with_the_providers_text_and_usage(passthrough_gateway: GatewayHandle, sim: SimHandle) -> None:
    got = _client(passthrough_gateway).responses.create(
        model="gpt-4o-mini", instructions="You are terse.", input="Say hi", max_output_tokens=50, metadata={"k": "v"}
    )
    forwarded = sim.received()[-1]
    assert forwarded["messages"] == [
        {"role": "system", "content": "You are terse."},
        {"role": "user", "content": "Say hi"},
    ]
    assert forwarded["max_completion_tokens"] == 50
    direct = _direct(sim, forwarded)
    assert got.output_text == direct["choices"][0]["message"]["content"]
    assert got.status == "completed"
    assert got.metadata == {"k": "v"}
    assert got.usage.input_tokens == direct["usage"]["prompt_tokens"]
    assert got.usage.input_tokens_details.cached_tokens == direct["usage"]["prompt_tokens_details"]["cached_tokens"]


def test_stream_relays_text_deltas_and_completes(passthrough_gateway: GatewayHandle, sim: SimHandle) -> None:
    client = _client(passthrough_gateway)
    with client.responses.stream(model="gpt-4o-mini", input="Stream me a short answer please") as stream:
        kinds = [event.type for event in stream]
        final = stream.get_final_response()
    direct = _direct(sim, sim.received()[-1])
    assert final.output_text == direct["choices"][0]["message"]["content"]
    assert kinds[:2] == ["response.created", "response.in_progress"]
    assert kinds.count("response.output_text.delta") == len(final.output_text.split(" "))
    assert kinds[-1] == "response.completed"
    assert final.usage is not None and final.usage.input_tokens > 0
    assert client.responses.retrieve(final.id).output_text == final.output_text


def test_previous_response_id_rebuilds_the_conversation(passthrough_gateway: GatewayHandle, sim: SimHandle) -> None:
    client = _client(passthrough_gateway)
    first = client.responses.create(model="gpt-4o-mini", instructions="Be brief.", input="My name is Ana.")
    second = client.responses.create(model="gpt-4o-mini", previous_response_id=first.id, input="What is my name?")
    third = client.responses.create(model="gpt-4o-mini", previous_response_id=second.id, input="And again?")
    sent = sim.received()[-1]["messages"]
    assert [m["role"] for m in sent] == ["user", "assistant", "user", "assistant", "user"]  # instructions not kept
    assert sent[1]["content"] == first.output_text and sent[3]["content"] == second.output_text
    assert sent[4]["content"] == "And again?"
    items = client.responses.input_items.list(third.id)
    assert [i.content[0].text if isinstance(i.content, list) else i.content for i in items.data] == ["And again?"]


def test_item_reference_names_an_item_of_the_stored_conversation(
    passthrough_gateway: GatewayHandle, sim: SimHandle
) -> None:
    client = _client(passthrough_gateway)
    first = client.responses.create(model="gpt-4o-mini", input="The code word is teal.")
    client.responses.create(
        model="gpt-4o-mini",
        previous_response_id=first.id,
        input=[{"type": "item_reference", "id": first.output[0].id}, {"role": "user", "content": "Again?"}],
    )
    sent = sim.received()[-1]["messages"]
    assert [m["content"] for m in sent] == ["The code word is teal.", first.output_text, first.output_text, "Again?"]


def test_function_call_round_trip(passthrough_gateway: GatewayHandle, sim: SimHandle) -> None:
    client = _client(passthrough_gateway)
    asked = client.responses.create(
        model="gpt-4o-mini",
        input="Weather in Lima?",
        tools=TOOLS,
        tool_choice={"type": "function", "name": "get_weather"},
    )
    call = asked.output[0]
    assert call.type == "function_call" and call.name == "get_weather" and call.arguments == '{"city":"example"}'
    answered = client.responses.create(
        model="gpt-4o-mini",
        previous_response_id=asked.id,
        input=[{"type": "function_call_output", "call_id": call.call_id, "output": "22 C, sunny"}],
        tools=TOOLS,
    )
    sent = sim.received()[-1]
    assert sent["messages"][1]["tool_calls"][0]["id"] == call.call_id
    assert sent["messages"][2] == {"role": "tool", "tool_call_id": call.call_id, "content": "22 C, sunny"}
    assert sent["tools"][0]["function"]["name"] == "get_weather"
    assert answered.output_text.startswith("Simulated answer")


def test_streamed_function_call_arrives_as_argument_events(passthrough_gateway: GatewayHandle) -> None:
    client = _client(passthrough_gateway)
    with client.responses.stream(
        model="gpt-4o-mini", input="Weather in Quito?", tools=TOOLS, tool_choice="required"
    ) as stream:
        kinds = [event.type for event in stream]
        final = stream.get_final_response()
    assert "response.function_call_arguments.delta" in kinds
    assert "response.function_call_arguments.done" in kinds
    assert final.output[0].type == "function_call" and final.output[0].arguments == '{"city":"example"}'


def test_another_callers_response_is_not_found(passthrough_gateway: GatewayHandle) -> None:
    mine = _client(passthrough_gateway, "sk-alice").responses.create(model="gpt-4o-mini", input="secret plan")
    bob = _client(passthrough_gateway, "sk-bob")
    with pytest.raises(openai.NotFoundError):
        bob.responses.retrieve(mine.id)
    with pytest.raises(openai.NotFoundError):
        bob.responses.create(model="gpt-4o-mini", previous_response_id=mine.id, input="continue")
    with pytest.raises(openai.NotFoundError):
        bob.responses.delete(mine.id)
    assert _client(passthrough_gateway, "sk-alice").responses.retrieve(mine.id).id == mine.id


def test_delete_and_store_false_keep_nothing(passthrough_gateway: GatewayHandle) -> None:
    client = _client(passthrough_gateway)
    kept = client.responses.create(model="gpt-4o-mini", input="keep me")
    client.responses.delete(kept.id)
    with pytest.raises(openai.NotFoundError):
        client.responses.retrieve(kept.id)
    unstored = client.responses.create(model="gpt-4o-mini", input="forget me", store=False)
    with pytest.raises(openai.NotFoundError):
        client.responses.retrieve(unstored.id)


def test_json_schema_format_and_unsupported_tools(passthrough_gateway: GatewayHandle, sim: SimHandle) -> None:
    client = _client(passthrough_gateway)
    schema = {
        "type": "object",
        "properties": {"a": {"type": "string"}},
        "required": ["a"],
        "additionalProperties": False,
    }
    client.responses.create(
        model="gpt-4o-mini",
        input="json please",
        text={"format": {"type": "json_schema", "name": "thing", "schema": schema, "strict": True}},
        parallel_tool_calls=False,
    )
    sent = sim.received()[-1]
    assert sent["response_format"] == {
        "type": "json_schema",
        "json_schema": {"name": "thing", "schema": schema, "strict": True},
    }
    assert sent["parallel_tool_calls"] is False
    searched = client.responses.with_raw_response.create(
        model="gpt-4o-mini", input="search", tools=[{"type": "web_search"}, *TOOLS]
    )
    assert searched.headers["x-ventana-unserved-tools"] == "web_search"
    assert [t["function"]["name"] for t in sim.received()[-1]["tools"]] == ["get_weather"]
    with pytest.raises(openai.BadRequestError) as refused:
        client.responses.create(model="gpt-4o-mini", input="later", background=True)
    assert refused.value.body["param"] == "background"


def test_chain_spans_workers_with_the_database_store(sim: SimHandle, tmp_path_factory: pytest.TempPathFactory) -> None:
    """With ``session_state: database`` every worker reads the same stored responses."""
    tmp = tmp_path_factory.mktemp("gw-responses-db")
    config = {
        "models": sim_models(sim.base_url),
        "session_state": "database",
        "database_url": f"sqlite:///{tmp / 'store.db'}",
    }
    request_ids, sessions = [], set()
    with run_gateway(tmp, config, workers=2) as gw:
        previous = None
        for turn in range(6):
            body = {"model": "gpt-4o-mini", "input": f"turn {turn}", "previous_response_id": previous}
            r = httpx.post(gw.base_url + "/responses", json=body, timeout=30)  # a new connection: any worker
            assert r.status_code == 200, r.text
            previous = r.json()["id"]
            request_ids.append(r.headers["x-ventana-request-id"])
            sessions.add(r.headers["x-ventana-session-id"])
        users = [m["content"] for m in sim.received()[-1]["messages"] if m["role"] == "user"]
        assert users == [f"turn {t}" for t in range(6)]
        assert httpx.get(f"{gw.base_url}/responses/{previous}").json()["id"] == previous
    assert len(sessions) == 1, "a chain of responses is one gateway session"
    engine = make_engine(config["database_url"])
    try:
        records = [get_request(engine, rid) for rid in request_ids]  # written before the gateway stopped
    finally:
        engine.dispose()
    assert all(r is not None and r.summary.session_id in sessions and r.summary.status == 200 for r in records)
    last = records[-1]
    assert last is not None and [m["content"] for m in last.original["messages"]][-1] == "turn 5"
