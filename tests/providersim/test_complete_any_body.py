"""``complete`` answers any body a client may send with a well-formed completion, never an exception.

The fuzz tests reach the simulator through the gateway with schemas and tool definitions no
model would see; a crash there would be a 500 from the provider, not the gateway's answer.
"""

from __future__ import annotations

from typing import Any

import orjson
from hypothesis import given, settings
from hypothesis import strategies as st

from gateway.providersim.completion import complete

_SCALARS = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False), st.text(max_size=8))
_KEYS = st.sampled_from(
    [
        "type",
        "properties",
        "items",
        "required",
        "enum",
        "const",
        "anyOf",
        "$ref",
        "minimum",
        "maximum",
        "minLength",
        "maxLength",
        "minItems",
        "maxItems",
        "format",
        "$defs",
        "city",
        "name",
    ]
)
_JSONISH = st.recursive(
    _SCALARS | st.sampled_from(["object", "array", "string", "integer", "number", "boolean", "null", "#/$defs/x"]),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_KEYS, inner, max_size=4),
    max_leaves=20,
)


def _body(schema: Any, params: Any, choice: Any, text: str, extra: dict[str, Any]) -> dict[str, Any]:
    tools = [
        {"type": "function", "function": {"name": "get_city", "description": "city weather", "parameters": params}}
    ]
    fmt = {"type": "json_schema", "json_schema": {"name": "x", "schema": schema}}
    messages = [{"role": "user", "content": text}, {"role": "tool", "tool_call_id": "c", "content": text}]
    return {
        "model": "gpt-4o-mini",
        "messages": messages,
        "tools": tools,
        "tool_choice": choice,
        "response_format": fmt,
        **extra,
    }


@settings(max_examples=150, deadline=None)
@given(
    schema=_JSONISH,
    params=_JSONISH,
    choice=st.sampled_from([None, "auto", "required", "none", {"type": "function", "function": {"name": "get_city"}}]),
    text=st.text(max_size=40),
    extra=st.fixed_dictionaries(
        {},
        optional={
            "n": st.integers(-2, 40),
            "logprobs": st.booleans(),
            "top_logprobs": st.integers(-1, 30),
            "max_completion_tokens": st.integers(-1, 5),
            "parallel_tool_calls": st.booleans(),
        },
    ),
)
def test_any_body_gets_a_well_formed_completion(
    schema: Any, params: Any, choice: Any, text: str, extra: dict[str, Any]
) -> None:
    answer = complete(
        _body(schema, params, choice, text, extra),
        completion_id="chatcmpl-sim0123456789abcdef",
        usage={"prompt_tokens": 1},
    )
    orjson.dumps(answer)
    assert answer["choices"] and answer["usage"]["completion_tokens"] >= 1
    for c in answer["choices"]:
        message = c["message"]
        assert (message["content"] is None) == bool(message.get("tool_calls"))
        for call in message.get("tool_calls") or []:
            assert isinstance(orjson.loads(call["function"]["arguments"]), dict)
