"""Responses <-> Chat Completions translation: pure functions, checked as input/expected pairs."""

from __future__ import annotations

from typing import Any

import pytest

from gateway.errors import RequestError
from gateway.formats.responses import chat_body, check_request, input_items, unserved_tools
from gateway.formats.responses_answer import listed_item, response_from_chat, response_object
from gateway.formats.responses_stream import ResponseEvents

RID = "resp_abc"
CALL = {"type": "function_call", "call_id": "c1", "name": "lookup", "arguments": '{"q":"x"}'}


def _chat(request: dict[str, Any]) -> dict[str, Any]:
    request = {"model": "m", **request}
    return chat_body(check_request(request), input_items(request, RID))


def test_string_input_and_instructions_become_system_then_user() -> None:
    assert _chat({"input": "hi", "instructions": "be brief"})["messages"] == [
        {"role": "system", "content": "be brief"},
        {"role": "user", "content": "hi"},
    ]


def test_consecutive_calls_join_one_assistant_message_after_its_text() -> None:
    second = {**CALL, "call_id": "c2"}
    items = [
        {"role": "user", "content": "go"},
        {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "on it"}]},
        CALL,
        second,
        {"type": "function_call_output", "call_id": "c1", "output": "one"},
        {"type": "function_call_output", "call_id": "c2", "output": [{"type": "input_text", "text": "two"}]},
        {"type": "reasoning", "id": "rs_1", "summary": []},
    ]
    messages = _chat({"input": items})["messages"]
    assert messages[1] == {
        "role": "assistant",
        "content": "on it",
        "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "lookup", "arguments": '{"q":"x"}'}},
            {"id": "c2", "type": "function", "function": {"name": "lookup", "arguments": '{"q":"x"}'}},
        ],
    }
    assert messages[2:] == [
        {"role": "tool", "tool_call_id": "c1", "content": "one"},
        {"role": "tool", "tool_call_id": "c2", "content": "two"},
    ]
    assert len(messages) == 4, "the reasoning item has no chat message"


def test_image_part_becomes_an_image_url_part() -> None:
    part = {"type": "input_image", "image_url": "https://x/y.png", "detail": "high"}
    content = _chat({"input": [{"role": "user", "content": [{"type": "input_text", "text": "see"}, part]}]})
    assert content["messages"][0]["content"] == [
        {"type": "text", "text": "see"},
        {"type": "image_url", "image_url": {"url": "https://x/y.png", "detail": "high"}},
    ]


def test_parameters_tools_choice_and_format_map_to_their_chat_names() -> None:
    tool = {"type": "function", "name": "lookup", "parameters": {"type": "object"}, "strict": True}
    body = _chat(
        {
            "input": "x",
            "tools": [
                tool,
                {"type": "web_search"},
                {"type": "namespace", "name": "ns", "tools": [{**tool, "name": "inner"}]},
            ],
            "tool_choice": {"type": "function", "name": "lookup"},
            "max_output_tokens": 9,
            "parallel_tool_calls": False,
            "reasoning": {"effort": "low"},
            "text": {"format": {"type": "json_object"}},
            "stream": True,
            "metadata": {"not": "forwarded"},
            "store": False,
        }
    )
    assert [t["function"]["name"] for t in body["tools"]] == ["lookup", "inner"]
    assert body["tool_choice"] == {"type": "function", "function": {"name": "lookup"}}
    assert body["max_completion_tokens"] == 9 and body["parallel_tool_calls"] is False
    assert body["reasoning_effort"] == "low" and body["response_format"] == {"type": "json_object"}
    assert body["stream_options"] == {"include_usage": True}
    assert "metadata" not in body and "store" not in body
    assert unserved_tools({"tools": [tool, {"type": "web_search"}]}) == ["web_search"]


@pytest.mark.parametrize(
    ("request_", "param"),
    [
        ({"input": 1}, "input"),
        ({"input": "x", "background": True}, "background"),
        ({"input": [{"type": "computer_call"}]}, "input[0].type"),
        ({"input": [{"type": "function_call", "name": "f"}]}, "input[0].call_id"),
        ({"input": [{"role": "tool", "content": "x"}]}, "input[0].role"),
        ({"input": "x", "max_output_tokens": 0}, "max_output_tokens"),
        ({"input": "x", "stream": "yes"}, "stream"),
        ({"input": "x", "store": 0}, "store"),
        ({"input": "x", "text": {"format": {"type": "grammar"}}}, "text.format"),
    ],
)
def test_what_chat_cannot_carry_is_refused_naming_the_field(request_: dict[str, Any], param: str) -> None:
    with pytest.raises(RequestError) as refused:
        _chat(request_)
    assert refused.value.param == param


def test_answer_with_text_and_call_becomes_two_items_with_usage() -> None:
    chat = {
        "choices": [
            {
                "message": {
                    "role": "assistant",
                    "content": "calling",
                    "tool_calls": [{"id": "c9", "type": "function", "function": {"name": "f", "arguments": "{}"}}],
                },
                "finish_reason": "tool_calls",
            }
        ],
        "usage": {
            "prompt_tokens": 100,
            "completion_tokens": 5,
            "total_tokens": 105,
            "prompt_tokens_details": {"cached_tokens": 64},
        },
    }
    got = response_from_chat(chat, response_object({"model": "m"}, RID, 1), 2)
    assert [(i["type"], i["status"]) for i in got["output"]] == [
        ("message", "completed"),
        ("function_call", "completed"),
    ]
    assert got["output"][1]["call_id"] == "c9" and got["status"] == "completed" and got["completed_at"] == 2
    assert got["usage"]["input_tokens_details"] == {"cached_tokens": 64, "cache_write_tokens": 0}


def test_length_finish_is_incomplete() -> None:
    chat = {"choices": [{"message": {"content": "cut"}, "finish_reason": "length"}]}
    got = response_from_chat(chat, response_object({"model": "m"}, RID, 1), 2)
    assert got["status"] == "incomplete" and got["incomplete_details"] == {"reason": "max_output_tokens"}


def test_output_translated_back_gives_the_same_chat_message() -> None:
    """Turn N's answer, sent again as turn N+1's history, is the message the provider answered with:
    otherwise the session's history would not be recognised and the prefix cache would miss."""
    message = {
        "role": "assistant",
        "content": "done",
        "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}],
    }
    got = response_from_chat({"choices": [{"message": message}]}, response_object({"model": "m"}, RID, 1), 2)
    again = chat_body({"model": "m"}, got["output"])["messages"]
    assert again == [message]


def test_stream_events_open_fill_and_close_each_item_in_order() -> None:
    events = ResponseEvents(response_object({"model": "m"}, RID, 1))
    out = events.start()
    base = {"id": "x", "object": "chat.completion.chunk"}
    for delta in ({"role": "assistant", "content": ""}, {"content": "Hel"}, {"content": "lo"}):
        out += events.chunk({**base, "choices": [{"index": 0, "delta": delta}]})
    call = {"index": 0, "id": "c1", "type": "function", "function": {"name": "f", "arguments": '{"a"'}}
    out += events.chunk({**base, "choices": [{"index": 0, "delta": {"tool_calls": [call]}}]})
    more = {"index": 0, "function": {"arguments": ": 1}"}}
    out += events.chunk(
        {**base, "choices": [{"index": 0, "delta": {"tool_calls": [more]}, "finish_reason": "tool_calls"}]}
    )
    out += events.chunk(
        {**base, "choices": [], "usage": {"prompt_tokens": 3, "completion_tokens": 1, "total_tokens": 4}}
    )
    closing, final = events.complete(2)
    out += closing
    assert [e["type"] for e in out] == [
        "response.created",
        "response.in_progress",
        "response.output_item.added",
        "response.content_part.added",
        "response.output_text.delta",
        "response.output_text.delta",
        "response.output_text.done",
        "response.content_part.done",
        "response.output_item.done",
        "response.output_item.added",
        "response.function_call_arguments.delta",
        "response.function_call_arguments.delta",
        "response.function_call_arguments.done",
        "response.output_item.done",
        "response.completed",
    ]
    assert [e["sequence_number"] for e in out] == list(range(len(out)))
    assert final["output"][0]["content"][0]["text"] == "Hello"
    assert final["output"][1]["arguments"] == '{"a": 1}' and final["usage"]["total_tokens"] == 4


def test_listed_items_show_text_as_parts_but_the_stored_item_is_unchanged() -> None:
    item = {"type": "message", "role": "user", "content": "hi", "id": "msg_1"}
    assert listed_item(item)["content"] == [{"type": "input_text", "text": "hi"}]
    assert item["content"] == "hi"


def test_a_namespaced_function_call_comes_back_naming_its_namespace() -> None:
    inner = {"type": "function", "name": "close_agent", "parameters": {"type": "object"}}
    base = response_object({"model": "m", "tools": [{"type": "namespace", "name": "agents", "tools": [inner]}]}, RID, 1)
    call = {"id": "c1", "type": "function", "function": {"name": "close_agent", "arguments": "{}"}}
    got = response_from_chat({"choices": [{"message": {"content": None, "tool_calls": [call]}}]}, base, 2)
    assert got["output"][0]["namespace"] == "agents"
    events = ResponseEvents(base)
    events.chunk({"choices": [{"index": 0, "delta": {"tool_calls": [{"index": 0, **call}]}}]})
    assert events.complete(2)[1]["output"][0]["namespace"] == "agents"


def test_item_reference_is_replaced_by_the_stored_item_it_names() -> None:
    earlier = [{"type": "message", "role": "user", "content": "remember me", "id": "msg_old"}]
    request = {"model": "m", "input": [{"type": "item_reference", "id": "msg_old"}]}
    assert input_items(request, RID, earlier) == earlier
    with pytest.raises(RequestError) as refused:
        input_items({"model": "m", "input": [{"type": "item_reference", "id": "msg_gone"}]}, RID, earlier)
    assert refused.value.param == "input[0].id"
