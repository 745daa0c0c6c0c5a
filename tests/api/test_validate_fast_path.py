"""Validation's fast path for text messages lets through only what the full checks accept."""

from __future__ import annotations

from typing import Any

import pytest

from gateway.api.validate import validate_chat_request
from gateway.errors import RequestError

BAD: list[tuple[dict[str, Any], str]] = [
    ({"role": "bogus", "content": "x"}, "messages[0].role"),
    ({"role": "tool", "content": "x", "tool_call_id": 7}, "messages[0].tool_call_id"),
    ({"role": "tool", "content": "x"}, "messages[0].tool_call_id"),
    ({"role": "user", "content": "x", "tool_calls": []}, "messages[0].tool_calls"),
    ({"role": "user", "content": 3}, "messages[0].content"),
]


@pytest.mark.parametrize(("message", "param"), BAD)
def test_malformed_message_is_rejected_naming_the_field(message: dict[str, Any], param: str) -> None:
    with pytest.raises(RequestError) as caught:
        validate_chat_request({"model": "m", "messages": [message]}, max_messages=10)
    assert caught.value.param == param


def test_text_messages_and_answered_tool_calls_pass() -> None:
    call = {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}
    messages = [
        {"role": "system", "content": "s"},
        {"role": "user", "content": "u"},
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "c1", "content": "r"},
    ]
    validate_chat_request({"model": "m", "messages": messages}, max_messages=10)


def test_tools_a_previous_turn_checked_are_not_checked_again_but_the_choice_is() -> None:
    bad_tools = [{"type": "function", "function": {"name": ""}}]
    body = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "tools": bad_tools}
    with pytest.raises(RequestError):
        validate_chat_request(body, max_messages=10)
    validate_chat_request(body, max_messages=10, known_tools=True)  # vouched for by the parser: not looked at
    with pytest.raises(RequestError):
        validate_chat_request(
            {**body, "tool_choice": {"type": "function", "function": {"name": "x"}}}, max_messages=10, known_tools=True
        )
