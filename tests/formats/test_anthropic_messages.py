"""Translation between the Messages format and chat bodies, checked against Anthropic's documented schema."""

from __future__ import annotations

from typing import Any

import jsonschema
import orjson
import pytest

from gateway.api.validate import validate_chat_request
from gateway.errors import RequestError
from gateway.formats.anthropic_messages import chat_body, error_body, message_from_chat, usage_of, without_origins
from gateway.formats.anthropic_stream import MessagesStream, chat_payloads
from tests.formats.anthropic_schema import ERROR, MESSAGE, REQUEST, check_events, parse_sse

EPHEMERAL = {"type": "ephemeral"}
TOOL = {
    "name": "read_file",
    "description": "Read a file",
    "input_schema": {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]},
}

FULL_REQUEST: dict[str, Any] = {
    "model": "claude-sonnet-4-5",
    "max_tokens": 256,
    "system": [{"type": "text", "text": "You are careful.", "cache_control": EPHEMERAL}],
    "messages": [
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "Read it"},
                {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBOR"}},
                {
                    "type": "document",
                    "source": {"type": "text", "media_type": "text/plain", "data": "Doc body"},
                    "title": "Spec",
                },
            ],
        },
        {
            "role": "assistant",
            "content": [
                {"type": "thinking", "thinking": "I should read it.", "signature": "sig-1"},
                {"type": "redacted_thinking", "data": "opaque"},
                {"type": "text", "text": "Reading."},
                {"type": "tool_use", "id": "toolu_1", "name": "read_file", "input": {"path": "a.py"}},
            ],
        },
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "toolu_1", "content": "print(1)", "cache_control": EPHEMERAL},
                {"type": "text", "text": "Now explain."},
            ],
        },
    ],
    "tools": [{**TOOL, "defer_loading": True, "cache_control": EPHEMERAL}],
    "tool_choice": {"type": "auto", "disable_parallel_tool_use": True},
    "stop_sequences": ["END"],
    "metadata": {"user_id": "user-7"},
    "temperature": 0.2,
    "top_k": 5,
    "thinking": {"type": "enabled", "budget_tokens": 1024},
}


def test_the_full_request_is_valid_by_the_documented_schema() -> None:
    jsonschema.validate(FULL_REQUEST, REQUEST)


def test_full_request_becomes_a_chat_body_the_chat_route_accepts() -> None:
    body = chat_body(FULL_REQUEST, "anthropic")
    validate_chat_request(body, max_messages=100)
    system, user, assistant, tool, follow_up = body["messages"]
    assert system == {
        "role": "system",
        "content": [{"type": "text", "text": "You are careful.", "cache_control": EPHEMERAL}],
    }
    assert user["content"][1] == {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBOR"}}
    assert user["content"][2] == {"type": "text", "text": "Spec\n\nDoc body"}
    assert assistant["content"] == "Reading."
    assert assistant["thinking_blocks"] == FULL_REQUEST["messages"][1]["content"][:2]
    assert assistant["tool_calls"] == [
        {"id": "toolu_1", "type": "function", "function": {"name": "read_file", "arguments": '{"path":"a.py"}'}}
    ]
    assert tool == {"role": "tool", "tool_call_id": "toolu_1", "content": "print(1)", "cache_control": EPHEMERAL}
    assert follow_up == {"role": "user", "content": [{"type": "text", "text": "Now explain."}]}
    assert body["tools"] == [
        {
            "type": "function",
            "function": {"name": "read_file", "parameters": TOOL["input_schema"], "description": "Read a file"},
            "cache_control": EPHEMERAL,
            "defer_loading": True,
        }
    ]
    assert body["tool_choice"] == "auto" and body["parallel_tool_calls"] is False
    assert (body["stop"], body["user"], body["max_tokens"], body["temperature"]) == (["END"], "user-7", 256, 0.2)
    assert (body["top_k"], body["thinking"]) == (5, FULL_REQUEST["thinking"])


def test_anthropic_only_parameters_do_not_reach_other_providers() -> None:
    body = chat_body(FULL_REQUEST, "openai")
    validate_chat_request(body, max_messages=100)
    assert "top_k" not in body and "thinking" not in body
    text = orjson.dumps(body).decode()
    assert "cache_control" not in text and "thinking_blocks" not in text and "defer_loading" not in text
    assert body["messages"][2]["tool_calls"][0]["id"] == "toolu_1"  # the rest is kept


@pytest.mark.parametrize("provider", ["anthropic", "bedrock", "vertex_ai"])
def test_claude_providers_keep_breakpoints_thinking_and_deferred_tools(provider: str) -> None:
    text = orjson.dumps(chat_body(FULL_REQUEST, provider)).decode()
    assert "cache_control" in text and "thinking_blocks" in text and "defer_loading" in text


def test_tool_results_come_before_the_turns_text_whatever_their_order() -> None:
    request = {
        "model": "m",
        "max_tokens": 10,
        "messages": [
            {"role": "user", "content": "go"},
            {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "read_file", "input": {}}]},
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "here:"},
                    {
                        "type": "tool_result",
                        "tool_use_id": "t1",
                        "is_error": True,
                        "content": [{"type": "text", "text": "denied"}, {"type": "image", "source": {}}],
                    },
                ],
            },
        ],
    }
    body = chat_body(request, "openai")
    validate_chat_request(body, max_messages=10)
    assert [m["role"] for m in body["messages"]] == ["user", "assistant", "tool", "user"]
    assert body["messages"][1]["content"] is None
    assert body["messages"][2]["content"] == "[error] denied\n[image]"


def test_a_breakpoint_inside_a_tool_result_marks_the_tool_message() -> None:
    """litellm writes a breakpoint on a tool message as one on the text block inside the tool_result."""
    result = {
        "type": "tool_result",
        "tool_use_id": "t1",
        "content": [{"type": "text", "text": "ok", "cache_control": EPHEMERAL}],
    }
    request = {
        "model": "m",
        "max_tokens": 5,
        "messages": [
            {"role": "user", "content": "go"},
            {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "read_file", "input": {}}]},
            {"role": "user", "content": [result]},
        ],
    }
    assert chat_body(request, "anthropic")["messages"][-1] == {
        "role": "tool",
        "tool_call_id": "t1",
        "content": "ok",
        "cache_control": EPHEMERAL,
    }


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        (
            {"type": "base64", "media_type": "application/pdf", "data": "JVBER"},
            {"type": "file", "file": {"file_data": "data:application/pdf;base64,JVBER", "filename": "document.pdf"}},
        ),
        (
            {"type": "content", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]},
            {"type": "text", "text": "a\nb"},
        ),
        ({"type": "url", "url": "https://x.test/a.pdf"}, {"type": "text", "text": "[document: https://x.test/a.pdf]"}),
    ],
)
def test_documents_become_chat_parts(source: dict[str, Any], expected: dict[str, Any]) -> None:
    request = {
        "model": "m",
        "max_tokens": 5,
        "messages": [{"role": "user", "content": [{"type": "document", "source": source}]}],
    }
    assert chat_body(request, "openai")["messages"][0]["content"] == [expected]


@pytest.mark.parametrize(
    ("change", "param"),
    [
        ({"max_tokens": None}, "max_tokens"),
        ({"model": ""}, "model"),
        ({"messages": []}, "messages"),
        ({"messages": [{"role": "tool", "content": "x"}]}, "messages[0].role"),
        (
            {"messages": [{"role": "user", "content": [{"type": "tool_use", "id": "a", "name": "b"}]}]},
            "messages[0].content[0]",
        ),
        ({"tools": [{"type": "web_search_20250305", "name": "web_search"}]}, "tools[0].type"),
        ({"tools": [{"name": "x"}]}, "tools[0].input_schema"),
        ({"tool_choice": {"type": "sometimes"}}, "tool_choice"),
        ({"system": [{"type": "image"}]}, "system[0]"),
        ({"stop_sequences": [1]}, "stop_sequences"),
    ],
)
def test_malformed_requests_name_the_field(change: dict[str, Any], param: str) -> None:
    request = {"model": "m", "max_tokens": 5, "messages": [{"role": "user", "content": "hi"}], **change}
    with pytest.raises(RequestError) as raised:
        chat_body(request, "openai")
    assert raised.value.param == param and raised.value.status_code == 400


def _completion(**message: Any) -> dict[str, Any]:
    finish = "tool_calls" if message.get("tool_calls") else "stop"
    usage = {
        "prompt_tokens": 1500,
        "completion_tokens": 12,
        "cache_read_input_tokens": 1200,
        "cache_creation_input_tokens": 250,
        "prompt_tokens_details": {"cached_tokens": 1200},
    }
    return {
        "id": "chatcmpl-abc",
        "choices": [{"index": 0, "message": message, "finish_reason": finish}],
        "usage": usage,
    }


def test_a_chat_answer_becomes_a_documented_message() -> None:
    call = {"id": "toolu_9", "type": "function", "function": {"name": "read_file", "arguments": '{"path": "b.py"}'}}
    thinking = [{"type": "thinking", "thinking": "hm", "signature": "s"}]
    message = message_from_chat(
        _completion(content="Let me look.", tool_calls=[call], thinking_blocks=thinking), "claude-x"
    )
    jsonschema.validate(message, MESSAGE)
    assert message["content"] == [
        thinking[0],
        {"type": "text", "text": "Let me look."},
        {"type": "tool_use", "id": "toolu_9", "name": "read_file", "input": {"path": "b.py"}},
    ]
    assert message["stop_reason"] == "tool_use" and message["id"] == "msg_abc"
    assert message["usage"] == {
        "input_tokens": 50,
        "output_tokens": 12,
        "cache_read_input_tokens": 1200,
        "cache_creation_input_tokens": 250,
    }


def test_openai_cached_tokens_are_reported_as_cache_reads() -> None:
    usage = usage_of({"prompt_tokens": 2000, "completion_tokens": 3, "prompt_tokens_details": {"cached_tokens": 1024}})
    assert usage == {
        "input_tokens": 976,
        "output_tokens": 3,
        "cache_read_input_tokens": 1024,
        "cache_creation_input_tokens": 0,
    }


@pytest.mark.parametrize("status", [400, 401, 403, 404, 413, 429, 500, 502, 504, 529])
def test_errors_have_the_documented_shape(status: int) -> None:
    jsonschema.validate(error_body(status, "nope"), ERROR)


def _chunk(delta: dict[str, Any] | None = None, finish: str | None = None, usage: Any = None) -> bytes:
    choices = [] if delta is None else [{"index": 0, "delta": delta, "finish_reason": finish}]
    return b"data: " + orjson.dumps({"id": "chatcmpl-s1", "choices": choices, "usage": usage}) + b"\n\n"


CHAT_STREAM = [
    _chunk({"role": "assistant", "content": ""}),
    _chunk({"reasoning_content": "think"}),
    _chunk({"thinking_blocks": [{"type": "thinking", "thinking": "", "signature": "sig"}]}),
    _chunk({"content": "Hello"}),
    _chunk({"content": " world"}),
    _chunk({"tool_calls": [{"index": 0, "id": "toolu_a", "function": {"name": "read_file", "arguments": ""}}]}),
    _chunk({"tool_calls": [{"index": 0, "function": {"arguments": '{"path":'}}]}),
    _chunk({"tool_calls": [{"index": 0, "function": {"arguments": ' "c.py"}'}}]}),
    _chunk({"tool_calls": [{"index": 1, "id": "toolu_b", "function": {"name": "read_file", "arguments": "{}"}}]}),
    _chunk({}, "tool_calls"),
    _chunk(None, usage={"prompt_tokens": 40, "completion_tokens": 9, "prompt_tokens_details": {"cached_tokens": 0}}),
    b"data: [DONE]\n\n",
]


def _translate(chunks: list[bytes], split: int = 7) -> list[dict[str, Any]]:
    """Feed the stream in arbitrary byte slices, as the network delivers it."""
    stream, buffer, out = MessagesStream("claude-x"), bytearray(), b""
    data = b"".join(chunks)
    for start in range(0, len(data), split):
        for payload in chat_payloads(buffer, data[start : start + split]):
            if payload != b"[DONE]":
                out += b"".join(stream.feed(orjson.loads(payload)))
    return parse_sse(out + b"".join(stream.finish()))


def test_a_chat_stream_becomes_the_documented_event_sequence() -> None:
    events = _translate(CHAT_STREAM)
    check_events(events)
    assert [e["type"] for e in events][:2] == ["message_start", "ping"]
    starts = [e["content_block"]["type"] for e in events if e["type"] == "content_block_start"]
    assert starts == ["thinking", "text", "tool_use", "tool_use"]
    deltas = [e["delta"] for e in events if e["type"] == "content_block_delta"]
    assert {"type": "signature_delta", "signature": "sig"} in deltas
    assert "".join(d.get("text", "") for d in deltas) == "Hello world"
    assert "".join(d.get("partial_json", "") for d in deltas if deltas) == '{"path": "c.py"}{}'
    final = events[-2]
    assert final["delta"]["stop_reason"] == "tool_use"
    assert final["usage"] == {
        "input_tokens": 40,
        "output_tokens": 9,
        "cache_read_input_tokens": 0,
        "cache_creation_input_tokens": 0,
    }


def test_a_stream_with_no_chunks_still_opens_and_closes_the_message() -> None:
    events = _translate([b"data: [DONE]\n\n"])
    check_events(events)
    assert [e["type"] for e in events] == ["message_start", "ping", "message_delta", "message_stop"]


def test_a_native_view_keeps_server_tools_that_cannot_cross() -> None:
    search = {"type": "tool_search_tool_bm25_20251119", "name": "tool_search_tool_bm25"}
    request = {"model": "m", "max_tokens": 5, "messages": [{"role": "user", "content": "hi"}], "tools": [TOOL, search]}
    assert without_origins(chat_body(request, "anthropic", native=True))["tools"][1] == search
    with pytest.raises(RequestError) as raised:
        chat_body(request, "anthropic")
    assert raised.value.param == "tools[1].type"


TODAYS_CLAUDE_CODE: dict[str, Any] = {
    "model": "gateway-model",
    "max_tokens": 32000,
    "system": [{"type": "text", "text": "You are Claude Code.", "cache_control": EPHEMERAL}],
    "messages": [
        {"role": "user", "content": [{"type": "text", "text": "<system-reminder>ctx</system-reminder>"}]},
        {"role": "system", "content": "Mid-conversation instructions."},
        {"role": "user", "content": "make a file"},
        {
            "role": "assistant",
            "content": [
                {"type": "server_tool_use", "id": "srvtoolu_1", "name": "web_search", "input": {"query": "x"}},
                {"type": "web_search_tool_result", "tool_use_id": "srvtoolu_1", "content": []},
                {"type": "text", "text": "Found.", "citations": [{"type": "web_search_result_location", "url": "u"}]},
                {"type": "tool_use", "id": "toolu_1", "name": "ToolSearch", "input": {"query": "cron"}},
            ],
        },
        {
            "role": "user",
            "content": [
                {
                    "type": "tool_result",
                    "tool_use_id": "toolu_1",
                    "is_error": False,
                    "content": [{"type": "tool_reference", "tool_name": "CronCreate"}],
                },
                {"type": "search_result", "source": "s", "title": "t", "content": [{"type": "text", "text": "b"}]},
            ],
        },
    ],
    "tools": [TOOL, {"type": "web_search_20250305", "name": "web_search", "max_uses": 2}],
    "thinking": {"type": "adaptive"},
    "context_management": {"edits": [{"type": "clear_thinking_20251015", "keep": "all"}]},
    "output_config": {"effort": "high"},
    "future_field": {"x": 1},
}


def test_todays_claude_code_request_has_a_view_the_chat_route_accepts() -> None:
    body = without_origins(chat_body(TODAYS_CLAUDE_CODE, "anthropic", native=True))
    assert body["tools"][1]["type"] == "web_search_20250305"  # the gateway's door keeps it out of the view
    validate_chat_request({**body, "tools": body["tools"][:1]}, max_messages=100)
    roles = [m["role"] for m in body["messages"]]
    assert roles == ["system", "user", "system", "user", "assistant", "tool", "user"]
    assert body["messages"][5]["content"] == "[tool loaded: CronCreate]"
    assert body["messages"][6]["content"][0]["text"].startswith("[search result: t (s)]")


def test_crossing_names_the_block_that_cannot_cross_and_keeps_the_ones_that_can() -> None:
    with pytest.raises(RequestError) as raised:
        chat_body({**TODAYS_CLAUDE_CODE, "tools": [TOOL]}, "openai")
    assert raised.value.param == "messages[3].content[0]"  # a server tool call: its result means nothing alone
    plain = dict(TODAYS_CLAUDE_CODE, tools=[TOOL])
    plain["messages"] = [*TODAYS_CLAUDE_CODE["messages"][:3]]
    body = chat_body(plain, "openai")
    assert [m["role"] for m in body["messages"]] == ["system", "user", "system", "user"]
    assert "thinking" not in body and "context_management" not in body
