"""Responses validate against the official OpenAI OpenAPI description (its subset in tests/data/specs/)."""

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
        "function": {
            "name": "lookup",
            "parameters": {"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]},
        },
    }
]


@pytest.fixture(scope="module")
def components() -> dict[str, Any]:
    """The spec's component schemas, nullable rewritten as JSON Schema (see tests/api/openai_spec.py)."""
    return allow_null(load_spec()["components"])  # type: ignore[no-any-return]


def _validator(components: dict[str, Any], name: str) -> Draft202012Validator:
    return Draft202012Validator({"$ref": f"#/components/schemas/{name}", "components": components})


def _errors(validator: Draft202012Validator, instance: Any) -> list[str]:
    return [f"{list(e.absolute_path)}: {e.message}" for e in validator.iter_errors(instance)]


def test_completion_with_and_without_tool_calls_conforms(default_gateway: GatewayHandle, components: dict) -> None:
    validator = _validator(components, "CreateChatCompletionResponse")
    for extra in ({}, {"tools": TOOLS, "tool_choice": "required"}):
        body = {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "hello"}], **extra}
        r = httpx.post(default_gateway.base_url + "/chat/completions", json=body, timeout=30)
        assert r.status_code == 200
        assert _errors(validator, r.json()) == []


def test_stream_chunks_conform(default_gateway: GatewayHandle, components: dict) -> None:
    validator = _validator(components, "CreateChatCompletionStreamResponse")
    body = {
        "model": "gpt-4o-mini",
        "messages": [{"role": "user", "content": "stream"}],
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    with httpx.stream("POST", default_gateway.base_url + "/chat/completions", json=body, timeout=30) as r:
        lines = [ln[6:] for ln in r.iter_lines() if ln.startswith("data: ")]
    assert lines[-1] == "[DONE]"
    chunks = [orjson.loads(ln) for ln in lines[:-1]]
    assert len(chunks) > 2
    for chunk in chunks:
        assert _errors(validator, chunk) == []


def test_models_list_conforms(default_gateway: GatewayHandle, components: dict) -> None:
    r = httpx.get(default_gateway.base_url + "/models")
    assert _errors(_validator(components, "ListModelsResponse"), r.json()) == []


def test_error_body_conforms(default_gateway: GatewayHandle, components: dict) -> None:
    r = httpx.post(default_gateway.base_url + "/chat/completions", json={"model": "gpt-4o-mini"})
    assert r.status_code == 400
    assert _errors(_validator(components, "ErrorResponse"), r.json()) == []


def test_what_the_provider_receives_is_a_valid_request(
    default_gateway: GatewayHandle, sim: SimHandle, components: dict
) -> None:
    """Whatever the passes rewrote, the forwarded body is still a valid Chat Completions request."""
    validator = _validator(components, "CreateChatCompletionRequest")
    messages = [
        {"role": "system", "content": "You help. Current time: 2026-11-29T10:00:00Z. Request id: 9f1c2d3e-aaaa"},
        {"role": "user", "content": [{"type": "text", "text": "look this up"}]},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "lookup", "arguments": '{"q": "x"}'}}],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "result"},
        {"role": "user", "content": "thanks, and now?"},
    ]
    body = {"model": "gpt-4o-mini", "messages": messages, "tools": TOOLS, "stream": True}
    with httpx.stream("POST", default_gateway.base_url + "/chat/completions", json=body, timeout=30) as r:
        assert r.status_code == 200
        r.read()
    forwarded = sim.received()[-1]
    assert _errors(validator, forwarded) == []
