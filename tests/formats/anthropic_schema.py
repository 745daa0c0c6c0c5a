"""JSON Schemas of Anthropic's Messages API, written by hand from its published documentation.

No machine-readable description of the Messages API can be fetched here (Anthropic publishes
none in ``/work/shared/specs/``, and there is no internet), so these schemas transcribe the
documentation pages "Messages" (``POST /v1/messages``: request body and the ``Message``
object), "Count Message tokens", "Streaming Messages" (the event types and delta types) and
"Errors" (the error shape and its types), as of the 2023-06-01 API version. They are strict
where the documentation is (required fields, enums, ``additionalProperties: false`` on the
objects the gateway builds) and open where it is open (a request may carry fields this file
does not list).
"""

from __future__ import annotations

from typing import Any

_CACHE_CONTROL: dict[str, Any] = {
    "type": "object",
    "required": ["type"],
    "properties": {"type": {"const": "ephemeral"}, "ttl": {"enum": ["5m", "1h"]}},
}
_TEXT_BLOCK: dict[str, Any] = {
    "type": "object",
    "required": ["type", "text"],
    "properties": {
        "type": {"const": "text"},
        "text": {"type": "string"},
        "cache_control": _CACHE_CONTROL,
        "citations": {"type": ["array", "null"]},
    },
}
_IMAGE_BLOCK: dict[str, Any] = {
    "type": "object",
    "required": ["type", "source"],
    "properties": {
        "type": {"const": "image"},
        "source": {
            "oneOf": [
                {
                    "type": "object",
                    "required": ["type", "media_type", "data"],
                    "properties": {
                        "type": {"const": "base64"},
                        "media_type": {"enum": ["image/jpeg", "image/png", "image/gif", "image/webp"]},
                        "data": {"type": "string"},
                    },
                },
                {"type": "object", "required": ["type", "url"], "properties": {"type": {"const": "url"}}},
            ]
        },
        "cache_control": _CACHE_CONTROL,
    },
}
_DOCUMENT_BLOCK: dict[str, Any] = {
    "type": "object",
    "required": ["type", "source"],
    "properties": {
        "type": {"const": "document"},
        "source": {
            "type": "object",
            "required": ["type"],
            "properties": {"type": {"enum": ["base64", "text", "content", "url"]}},
        },
        "title": {"type": ["string", "null"]},
        "context": {"type": ["string", "null"]},
        "cache_control": _CACHE_CONTROL,
    },
}
_TOOL_USE_BLOCK: dict[str, Any] = {
    "type": "object",
    "required": ["type", "id", "name", "input"],
    "properties": {
        "type": {"const": "tool_use"},
        "id": {"type": "string", "minLength": 1},
        "name": {"type": "string", "minLength": 1},
        "input": {"type": "object"},
        "cache_control": _CACHE_CONTROL,
    },
}
_TOOL_RESULT_BLOCK: dict[str, Any] = {
    "type": "object",
    "required": ["type", "tool_use_id"],
    "properties": {
        "type": {"const": "tool_result"},
        "tool_use_id": {"type": "string"},
        "content": {"oneOf": [{"type": "string"}, {"type": "array", "items": {"oneOf": [_TEXT_BLOCK, _IMAGE_BLOCK]}}]},
        "is_error": {"type": "boolean"},
        "cache_control": _CACHE_CONTROL,
    },
}
_THINKING_BLOCK: dict[str, Any] = {
    "type": "object",
    "required": ["type", "thinking", "signature"],
    "properties": {"type": {"const": "thinking"}, "thinking": {"type": "string"}, "signature": {"type": "string"}},
}
_REDACTED_THINKING_BLOCK: dict[str, Any] = {
    "type": "object",
    "required": ["type", "data"],
    "properties": {"type": {"const": "redacted_thinking"}, "data": {"type": "string"}},
}
_INPUT_BLOCK: dict[str, Any] = {
    "oneOf": [
        _TEXT_BLOCK,
        _IMAGE_BLOCK,
        _DOCUMENT_BLOCK,
        _TOOL_USE_BLOCK,
        _TOOL_RESULT_BLOCK,
        _THINKING_BLOCK,
        _REDACTED_THINKING_BLOCK,
    ]
}
_TOOL: dict[str, Any] = {
    "type": "object",
    "required": ["name", "input_schema"],
    "properties": {
        "type": {"enum": ["custom", None]},
        "name": {"type": "string", "pattern": "^[a-zA-Z0-9_-]{1,128}$"},
        "description": {"type": "string"},
        "input_schema": {"type": "object", "required": ["type"], "properties": {"type": {"const": "object"}}},
        "cache_control": _CACHE_CONTROL,
        "defer_loading": {"type": "boolean"},
    },
}
#: Anthropic-defined tools (``web_search_20250305``, ``tool_search_tool_bm25_20251119``): a versioned type, a name.
_SERVER_TOOL: dict[str, Any] = {
    "type": "object",
    "required": ["type", "name"],
    "properties": {"type": {"type": "string", "pattern": "^[a-z0-9_]+_[0-9]{8}$"}, "name": {"type": "string"}},
}
_TOOL_CHOICE: dict[str, Any] = {
    "oneOf": [
        {"type": "object", "required": ["type"], "properties": {"type": {"enum": ["auto", "any", "none"]}}},
        {
            "type": "object",
            "required": ["type", "name"],
            "properties": {"type": {"const": "tool"}, "name": {"type": "string"}},
        },
    ]
}

REQUEST: dict[str, Any] = {
    "type": "object",
    "required": ["model", "max_tokens", "messages"],
    "properties": {
        "model": {"type": "string", "minLength": 1},
        "max_tokens": {"type": "integer", "minimum": 1},
        "messages": {
            "type": "array",
            "minItems": 1,
            "items": {
                "type": "object",
                "required": ["role", "content"],
                "properties": {
                    "role": {"enum": ["user", "assistant"]},
                    "content": {"oneOf": [{"type": "string"}, {"type": "array", "items": _INPUT_BLOCK}]},
                },
            },
        },
        "system": {"oneOf": [{"type": "string"}, {"type": "array", "items": _TEXT_BLOCK}]},
        "tools": {"type": "array", "items": {"anyOf": [_TOOL, _SERVER_TOOL]}},
        "tool_choice": _TOOL_CHOICE,
        "stop_sequences": {"type": "array", "items": {"type": "string"}},
        "metadata": {"type": "object", "properties": {"user_id": {"type": ["string", "null"]}}},
        "stream": {"type": "boolean"},
        "temperature": {"type": "number", "minimum": 0, "maximum": 1},
        "top_p": {"type": "number"},
        "top_k": {"type": "integer"},
        "thinking": {"type": "object", "required": ["type"]},
    },
}

COUNT_TOKENS_REQUEST: dict[str, Any] = {
    **REQUEST,
    "required": ["model", "messages"],
}
COUNT_TOKENS_RESPONSE: dict[str, Any] = {
    "type": "object",
    "required": ["input_tokens"],
    "additionalProperties": False,
    "properties": {"input_tokens": {"type": "integer", "minimum": 0}},
}

_USAGE: dict[str, Any] = {
    "type": "object",
    "required": ["input_tokens", "output_tokens"],
    "properties": {
        "input_tokens": {"type": "integer", "minimum": 0},
        "output_tokens": {"type": "integer", "minimum": 0},
        "cache_creation_input_tokens": {"type": ["integer", "null"], "minimum": 0},
        "cache_read_input_tokens": {"type": ["integer", "null"], "minimum": 0},
    },
}
STOP_REASONS = ["end_turn", "max_tokens", "stop_sequence", "tool_use", "pause_turn", "refusal"]
_OUTPUT_BLOCK: dict[str, Any] = {
    "oneOf": [
        {**_TEXT_BLOCK, "additionalProperties": False},
        {**_TOOL_USE_BLOCK, "additionalProperties": False},
        _THINKING_BLOCK,
        _REDACTED_THINKING_BLOCK,
    ]
}
_MESSAGE_FIELDS: dict[str, Any] = {
    "id": {"type": "string", "minLength": 1},
    "type": {"const": "message"},
    "role": {"const": "assistant"},
    "model": {"type": "string"},
    "content": {"type": "array", "items": _OUTPUT_BLOCK},
    "stop_reason": {"enum": [*STOP_REASONS, None]},
    "stop_sequence": {"type": ["string", "null"]},
    "usage": _USAGE,
}
MESSAGE: dict[str, Any] = {
    "type": "object",
    "required": list(_MESSAGE_FIELDS),
    "additionalProperties": False,
    "properties": {**_MESSAGE_FIELDS, "stop_reason": {"enum": STOP_REASONS}},
}

_DELTA: dict[str, Any] = {
    "oneOf": [
        {
            "type": "object",
            "required": ["type", "text"],
            "properties": {"type": {"const": "text_delta"}, "text": {"type": "string"}},
        },
        {
            "type": "object",
            "required": ["type", "partial_json"],
            "properties": {"type": {"const": "input_json_delta"}, "partial_json": {"type": "string"}},
        },
        {
            "type": "object",
            "required": ["type", "thinking"],
            "properties": {"type": {"const": "thinking_delta"}, "thinking": {"type": "string"}},
        },
        {
            "type": "object",
            "required": ["type", "signature"],
            "properties": {"type": {"const": "signature_delta"}, "signature": {"type": "string"}},
        },
    ]
}
_INDEX: dict[str, Any] = {"type": "integer", "minimum": 0}
_ERROR: dict[str, Any] = {
    "type": "object",
    "required": ["type", "error"],
    "additionalProperties": False,
    "properties": {
        "type": {"const": "error"},
        "error": {
            "type": "object",
            "required": ["type", "message"],
            "properties": {
                "type": {
                    "enum": [
                        "invalid_request_error",
                        "authentication_error",
                        "billing_error",
                        "permission_error",
                        "not_found_error",
                        "request_too_large",
                        "rate_limit_error",
                        "timeout_error",
                        "api_error",
                        "overloaded_error",
                    ]
                },
                "message": {"type": "string"},
            },
        },
    },
}
ERROR = _ERROR

#: One schema per streamed event type (the SSE ``event:`` name equals the payload's ``type``).
EVENTS: dict[str, dict[str, Any]] = {
    "message_start": {
        "type": "object",
        "required": ["type", "message"],
        "properties": {
            "type": {"const": "message_start"},
            "message": {
                "type": "object",
                "required": list(_MESSAGE_FIELDS),
                "properties": {**_MESSAGE_FIELDS, "content": {"type": "array", "maxItems": 0}},
            },
        },
    },
    "ping": {
        "type": "object",
        "required": ["type"],
        "additionalProperties": False,
        "properties": {"type": {"const": "ping"}},
    },
    "content_block_start": {
        "type": "object",
        "required": ["type", "index", "content_block"],
        "properties": {"type": {"const": "content_block_start"}, "index": _INDEX, "content_block": _OUTPUT_BLOCK},
    },
    "content_block_delta": {
        "type": "object",
        "required": ["type", "index", "delta"],
        "properties": {"type": {"const": "content_block_delta"}, "index": _INDEX, "delta": _DELTA},
    },
    "content_block_stop": {
        "type": "object",
        "required": ["type", "index"],
        "additionalProperties": False,
        "properties": {"type": {"const": "content_block_stop"}, "index": _INDEX},
    },
    "message_delta": {
        "type": "object",
        "required": ["type", "delta", "usage"],
        "properties": {
            "type": {"const": "message_delta"},
            "delta": {
                "type": "object",
                "required": ["stop_reason"],
                "properties": {"stop_reason": {"enum": STOP_REASONS}, "stop_sequence": {"type": ["string", "null"]}},
            },
            "usage": {**_USAGE, "required": ["output_tokens"]},
        },
    },
    "message_stop": {
        "type": "object",
        "required": ["type"],
        "additionalProperties": False,
        "properties": {"type": {"const": "message_stop"}},
    },
    "error": _ERROR,
}


def check_events(events: list[dict[str, Any]]) -> None:
    """Assert each event matches its schema and the sequence follows the documented grammar:
    ``message_start``, then blocks opened, delta'd and stopped in index order (one open at a time),
    ``ping`` anywhere, then ``message_delta`` and ``message_stop``; or an ``error`` that ends it."""
    import jsonschema

    assert events and events[0]["type"] == "message_start", [e["type"] for e in events[:3]]
    open_index: int | None = None
    next_index = 0
    ended = False
    for event in events:
        jsonschema.validate(event, EVENTS[event["type"]])
        kind = event["type"]
        assert not ended, f"{kind} after message_stop"
        if kind == "content_block_start":
            assert open_index is None and event["index"] == next_index
            open_index, next_index = event["index"], next_index + 1
        elif kind == "content_block_delta":
            assert event["index"] == open_index
        elif kind == "content_block_stop":
            assert event["index"] == open_index
            open_index = None
        elif kind in ("message_delta", "error"):
            assert open_index is None or kind == "error"
        elif kind == "message_stop":
            ended = True
    assert ended or events[-1]["type"] == "error"


def parse_sse(raw: bytes) -> list[dict[str, Any]]:
    """The payloads of an SSE body, checking each ``event:`` name equals its payload's ``type``."""
    import orjson

    out = []
    for chunk in raw.split(b"\n\n"):
        lines = dict(line.split(b": ", 1) for line in chunk.split(b"\n") if b": " in line)
        if b"data" in lines:
            payload = orjson.loads(lines[b"data"])
            assert lines.get(b"event", b"").decode() == payload["type"]
            out.append(payload)
    return out
