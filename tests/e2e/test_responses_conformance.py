"""The Responses route's requests, responses and stream events validate against the official OpenAI description."""

from __future__ import annotations

from typing import Any

import httpx
import orjson
import pytest
from jsonschema import Draft202012Validator

from tests.api.openai_spec import allow_null, load_spec
from tests.procs import GatewayHandle, SimHandle

TOOLS = [
    {
        "type": "function",
        "name": "lookup",
        "description": "Look a word up",
        "parameters": {"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]},
        "strict": False,
    }
]
REQUESTS: list[dict[str, Any]] = [
    {"model": "gpt-4o-mini", "input": "hello", "instructions": "Be terse.", "metadata": {"a": "b"}},
    {"model": "gpt-4o-mini", "input": "look it up", "tools": TOOLS, "tool_choice": "required"},
    {
        "model": "gpt-4o-mini",
        "input": [
            {
                "type": "message",
                "role": "user",
                "content": [
                    {"type": "input_text", "text": "what is in this picture?"},
                    {"type": "input_image", "image_url": "data:image/png;base64,iVBORw0KGgo=", "detail": "low"},
                ],
            },
            {"type": "reasoning", "id": "rs_1", "summary": []},
            {"type": "function_call", "call_id": "c1", "name": "lookup", "arguments": '{"q": "x"}'},
            {"type": "function_call_output", "call_id": "c1", "output": "a cat"},
        ],
        "tools": TOOLS,
        "max_output_tokens": 64,
        "parallel_tool_calls": False,
        "text": {"format": {"type": "json_schema", "name": "answer", "schema": {"type": "object"}, "strict": False}},
    },
]


@pytest.fixture(scope="module")
def components() -> dict[str, Any]:
    components: dict[str, Any] = allow_null(load_spec()["components"])
    # InputItem is a oneOf whose branches overlap (a message item is both an EasyInputMessage and
    # an InputMessage) and relies on its discriminator, which JSON Schema does not apply: a
    # message item matches two branches. anyOf keeps the check that it is one of them.
    item = components["schemas"]["InputItem"]
    item["anyOf"] = item.pop("oneOf")
    return components


def _validator(components: dict[str, Any], name: str) -> Draft202012Validator:
    return Draft202012Validator({"$ref": f"#/components/schemas/{name}", "components": components})


def _errors(validator: Draft202012Validator, instance: Any) -> list[str]:
    return [f"{list(e.absolute_path)}: {e.message}" for e in validator.iter_errors(instance)]


def _event_schemas(components: dict[str, Any]) -> dict[str, str]:
    """Each stream event's ``type`` -> the name of its schema in ``ResponseStreamEvent``."""
    found = {}
    for ref in components["schemas"]["ResponseStreamEvent"]["anyOf"]:
        name = ref["$ref"].rsplit("/", 1)[-1]
        for kind in components["schemas"][name]["properties"]["type"].get("enum", ()):
            found[kind] = name
    return found


def _events(url: str, body: dict[str, Any]) -> list[dict[str, Any]]:
    with httpx.stream("POST", url, json={**body, "stream": True}, timeout=30) as r:
        assert r.status_code == 200
        return [orjson.loads(line[6:]) for line in r.iter_lines() if line.startswith("data: ")]


@pytest.mark.parametrize("body", REQUESTS, ids=["text", "forced-tool", "items"])
def test_requests_used_here_are_valid_and_answers_conform(
    default_gateway: GatewayHandle, sim: SimHandle, components: dict, body: dict
) -> None:
    assert _errors(_validator(components, "CreateResponse"), body) == []
    r = httpx.post(default_gateway.base_url + "/responses", json=body, timeout=30)
    assert r.status_code == 200, r.text
    assert _errors(_validator(components, "Response"), r.json()) == []
    assert _errors(_validator(components, "CreateChatCompletionRequest"), sim.received()[-1]) == []


@pytest.mark.parametrize("body", REQUESTS[:2], ids=["text", "forced-tool"])
def test_stream_events_conform(default_gateway: GatewayHandle, components: dict, body: dict) -> None:
    schemas = _event_schemas(components)
    events = _events(default_gateway.base_url + "/responses", body)
    assert [e["sequence_number"] for e in events] == list(range(len(events)))
    for event in events:
        assert event["type"] in schemas, event["type"]
        assert _errors(_validator(components, schemas[event["type"]]), event) == [], event["type"]
    assert events[-1]["type"] == "response.completed"


def test_stored_reads_conform(default_gateway: GatewayHandle, components: dict) -> None:
    created = httpx.post(default_gateway.base_url + "/responses", json=REQUESTS[2], timeout=30).json()
    got = httpx.get(f"{default_gateway.base_url}/responses/{created['id']}")
    assert got.json() == created
    items = httpx.get(f"{default_gateway.base_url}/responses/{created['id']}/input_items", params={"order": "asc"})
    assert _errors(_validator(components, "ResponseItemList"), items.json()) == []
    assert [i["type"] for i in items.json()["data"]] == [
        "message",
        "reasoning",
        "function_call",
        "function_call_output",
    ]
    missing = httpx.get(f"{default_gateway.base_url}/responses/resp_nope")
    assert missing.status_code == 404
    assert _errors(_validator(components, "ErrorResponse"), missing.json()) == []


def test_refused_request_is_an_openai_error(default_gateway: GatewayHandle, components: dict) -> None:
    r = httpx.post(default_gateway.base_url + "/responses", json={"model": "gpt-4o-mini", "input": 3})
    assert r.status_code == 400
    assert r.json()["error"]["param"] == "input"
    assert _errors(_validator(components, "ErrorResponse"), r.json()) == []


def test_simulator_speaks_responses(sim: SimHandle, components: dict) -> None:
    """``ventana serve`` with no key answers Responses clients: the simulator itself serves the route."""
    r = httpx.post(sim.base_url + "/responses", json=REQUESTS[1], timeout=30)
    assert r.status_code == 200
    assert _errors(_validator(components, "Response"), r.json()) == []
    assert r.json()["output"][0]["type"] == "function_call"
    schemas = _event_schemas(components)
    events = _events(sim.base_url + "/responses", REQUESTS[0])
    for event in events:
        assert _errors(_validator(components, schemas[event["type"]]), event) == [], event["type"]
    assert events[-1]["response"]["output"][0]["content"][0]["text"].startswith("Simulated answer")


def test_a_stream_the_provider_drops_ends_as_response_failed(
    default_gateway: GatewayHandle, sim: SimHandle, components: dict
) -> None:
    sim.faults({"kind": "drop_stream", "times": 1})
    schemas = _event_schemas(components)
    events = _events(
        default_gateway.base_url + "/responses", {"model": "gpt-4o-mini", "input": "a long answer, please"}
    )
    assert [e["type"] for e in events[-2:]] == ["error", "response.failed"]
    assert events[-1]["response"]["error"]["code"] == "server_error"
    assert "response.output_text.delta" in [e["type"] for e in events], "text sent before the drop was relayed"
    for event in events:
        assert _errors(_validator(components, schemas[event["type"]]), event) == [], event["type"]
