"""Holes the fuzzers found in the validator: each body once raised TypeError/AttributeError (a 500)."""

from __future__ import annotations

from typing import Any

import pytest

from gateway.api.validate import validate_chat_request
from gateway.errors import RequestError

USER = {"role": "user", "content": "hi"}


def _body(**fields: Any) -> dict[str, Any]:
    return {"model": "m", "messages": [USER], **fields}


@pytest.mark.parametrize(
    ("body", "param"),
    [
        ({"model": "m", "messages": [USER, {"role": [], "content": ""}]}, "messages[1].role"),
        ({"model": "m", "messages": [{"role": {"a": 1}, "content": "x"}]}, "messages[0].role"),
        ({"model": "m", "messages": [{"role": "user", "content": [{"type": ["text"]}]}]}, "messages[0].content[0]"),
        ({"model": "m", "messages": [{"role": "user", "content": "x", "name": 7}]}, "messages[0].name"),
        (_body(stream=True, stream_options=["include_usage"]), "stream_options"),
        (_body(stream_options={"include_usage": "yes"}), "stream_options"),
        (
            _body(tools=[{"type": "function", "function": {"name": "f", "parameters": []}}]),
            "tools[0].function.parameters",
        ),
        (
            _body(tools=[{"type": "function", "function": {"name": "f", "description": 3}}]),
            "tools[0].function.description",
        ),
    ],
)
def test_malformed_fields_are_a_400_naming_the_field(body: dict[str, Any], param: str) -> None:
    with pytest.raises(RequestError) as info:
        validate_chat_request(body, max_messages=100)
    assert info.value.param == param
    assert info.value.status_code == 400


def test_unknown_fields_pass() -> None:
    validate_chat_request(
        {**_body(), "x_custom": {"deep": [1, 2]}, "messages": [{**USER, "x_note": 1}]}, max_messages=9
    )
