"""Reject malformed chat requests before they cost anything, naming the offending field.

Deliberately hand-written rather than a pydantic model of the whole body: a 100K-token
agent request must be checked in microseconds, unknown fields must pass through
untouched, and every message must be named precisely (``messages[3].tool_call_id``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import orjson

from gateway.errors import RequestError

ROLES = frozenset({"system", "developer", "user", "assistant", "tool", "function"})
#: dict first: parsed JSON is always dicts, and an ABC isinstance check costs ~10x more.
_MAP = (dict, Mapping)
_CONTENT_PART_TYPES = frozenset({"text", "image_url", "input_audio", "file", "refusal", "input_text"})


#: Levels of nesting around a checked value: a value is checked as if this deep in some record
#: (the body, the store's row), since orjson writes at most 254 levels however it was read.
_HEADROOM = 16


def _fail(message: str, param: str) -> RequestError:
    return RequestError(message, param=param, code="invalid_value")


def validate_chat_request(body: Any, *, max_messages: int, known_valid: int = 0, known_tools: bool = False) -> None:
    """Raise a RequestError naming the first bad field.

    The first ``known_valid`` messages were checked on an earlier turn and are the same
    objects (``api.incremental_parse``): each is checked again only as part of the whole
    (tool-call pairing, count), not on its own. ``known_tools``: the same holds for ``tools``
    (its definitions are not checked again; ``tool_choice`` still is, against them).
    """
    if not isinstance(body, _MAP):
        raise RequestError("the request body must be a JSON object", code="invalid_json")
    model = body.get("model")
    if not isinstance(model, str) or not model:
        raise _fail("'model' is required and must be a non-empty string", "model")
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise _fail("'messages' is required and must be a non-empty array", "messages")
    if len(messages) > max_messages:
        raise _fail(f"'messages' has {len(messages)} items, the limit is {max_messages}", "messages")
    for i in range(known_valid, len(messages)):
        _validate_message(messages[i], i)
        _validate_depth(messages[i], f"messages[{i}]")
    for name, value in body.items():
        if name != "messages" and value.__class__ in (dict, list) and not (known_tools and name == "tools"):
            _validate_depth(value, name)
    _validate_tool_pairs(messages, known_valid)
    if not known_tools:
        _validate_tools(body.get("tools"))
    _validate_choice(body)
    stream = body.get("stream")
    if stream is not None and not isinstance(stream, bool):
        raise _fail("'stream' must be a boolean", "stream")
    options = body.get("stream_options")
    if options is not None and (
        not isinstance(options, Mapping) or not isinstance(options.get("include_usage", False), bool)
    ):
        raise _fail("'stream_options' must be an object with a boolean 'include_usage'", "stream_options")
    for name in ("max_tokens", "max_completion_tokens", "n"):
        value = body.get(name)
        if value is not None and (not isinstance(value, int) or isinstance(value, bool) or value < 0):
            raise _fail(f"'{name}' must be a non-negative integer", name)
    temperature = body.get("temperature")
    if temperature is not None and (
        not isinstance(temperature, int | float) or isinstance(temperature, bool) or not 0 <= temperature <= 2
    ):
        raise _fail("'temperature' must be a number between 0 and 2", "temperature")


_TEXT_ROLES = frozenset({"system", "developer", "user", "assistant"})


def _validate_depth(value: Any, param: str) -> None:
    """Refuse a value nested deeper than orjson writes (a 500 later, when the body is encoded again).

    orjson reads 1024 levels but writes 254; encoding is also the fastest way to measure the
    depth (~30x a Python walk), and every value checked here is encoded later anyway."""
    for _ in range(_HEADROOM):
        value = [value]
    try:
        orjson.dumps(value)
    except TypeError as exc:
        if "ecursion" in str(exc):
            too_deep = f"'{param}' is nested too deep: at most {254 - _HEADROOM} levels of arrays and objects"
            raise _fail(too_deep, param) from exc
        # anything else orjson will not write (an integer past 64 bits) is handled where it is encoded


def _validate_message(message: Any, i: int) -> None:
    if message.__class__ is dict and message.get("content").__class__ is str and "tool_calls" not in message:
        # The common shape, text content and no calls, passes every check below: return
        # before building the field name, which halves validation of a long history.
        role = message.get("role")
        plain = role.__class__ is str and message.get("name", "").__class__ is str
        if plain and (role in _TEXT_ROLES or (role == "tool" and message.get("tool_call_id").__class__ is str)):
            return
    where = f"messages[{i}]"
    if not isinstance(message, _MAP):
        raise _fail(f"{where} must be an object", where)
    role = message.get("role")
    if not isinstance(role, str) or role not in ROLES:
        raise _fail(f"{where}.role must be one of {sorted(ROLES)}, found {role!r}", f"{where}.role")
    content = message.get("content")
    if content is None:
        if role != "assistant":
            raise _fail(f"{where}.content is required for role {role!r}", f"{where}.content")
    elif isinstance(content, list):
        for j, part in enumerate(content):
            kind = part.get("type") if isinstance(part, _MAP) else None
            if not isinstance(kind, str) or kind not in _CONTENT_PART_TYPES:
                raise _fail(
                    f"{where}.content[{j}] must be an object with a 'type' in {sorted(_CONTENT_PART_TYPES)}",
                    f"{where}.content[{j}]",
                )
            if part.get("type") == "text" and not isinstance(part.get("text"), str):
                raise _fail(f"{where}.content[{j}].text must be a string", f"{where}.content[{j}].text")
    elif not isinstance(content, str):
        raise _fail(f"{where}.content must be a string or an array of content parts", f"{where}.content")
    name = message.get("name")
    if name is not None and not isinstance(name, str):
        raise _fail(f"{where}.name must be a string", f"{where}.name")
    if role == "tool" and not isinstance(message.get("tool_call_id"), str):
        raise _fail(f"{where}.tool_call_id is required for a tool message", f"{where}.tool_call_id")
    calls = message.get("tool_calls")
    if calls is not None:
        if role != "assistant" or not isinstance(calls, list):
            raise _fail(f"{where}.tool_calls must be an array on an assistant message", f"{where}.tool_calls")
        for j, call in enumerate(calls):
            fn = call.get("function") if isinstance(call, _MAP) else None
            if not isinstance(call, _MAP) or not isinstance(call.get("id"), str) or not isinstance(fn, _MAP):
                raise _fail(
                    f"{where}.tool_calls[{j}] must have a string 'id' and a 'function' object",
                    f"{where}.tool_calls[{j}]",
                )
            if not isinstance(fn.get("name"), str) or not isinstance(fn.get("arguments", ""), str):
                raise _fail(
                    f"{where}.tool_calls[{j}].function needs a string 'name' and string 'arguments'",
                    f"{where}.tool_calls[{j}].function",
                )


def _validate_tool_pairs(messages: list[Any], start: int = 0) -> None:
    """Every tool result must answer a call made by the closest preceding assistant message.

    The first ``start`` messages passed this check as the start of an earlier body, so
    only the calls still open where they end are needed to check the rest.
    """
    pending = _open_calls(messages, start)
    for i in range(start, len(messages)):
        message = messages[i]
        role = message.get("role")
        if role == "assistant":
            pending = {c["id"] for c in message.get("tool_calls") or ()}
        elif role == "tool":
            call_id = message["tool_call_id"]
            if call_id not in pending:
                raise _fail(
                    f"messages[{i}] is a tool result for {call_id!r}, which no preceding assistant message called",
                    f"messages[{i}].tool_call_id",
                )
            pending.discard(call_id)
        elif role in ("user", "system", "developer") and pending:
            raise _fail(
                f"messages[{i}] follows an assistant tool call without its result: {sorted(pending)}",
                f"messages[{i}]",
            )


def _open_calls(messages: list[Any], end: int) -> set[str]:
    """The calls of a valid ``messages[:end]`` still awaiting a result, read backwards to the
    last assistant message (a user or system message means none: it could only follow answered calls)."""
    answered: set[str] = set()
    for i in range(end - 1, -1, -1):
        role = messages[i].get("role")
        if role == "tool":
            answered.add(messages[i]["tool_call_id"])
        elif role == "assistant":
            return {c["id"] for c in messages[i].get("tool_calls") or ()} - answered
        elif role in ("user", "system", "developer"):
            return set()
    return set()


def _validate_tools(tools: Any) -> None:
    if tools is None:
        return
    if not isinstance(tools, list):
        raise _fail("'tools' must be an array", "tools")
    for i, tool in enumerate(tools):
        fn = tool.get("function") if isinstance(tool, _MAP) else None
        if not isinstance(tool, _MAP) or tool.get("type", "function") != "function" or not isinstance(fn, _MAP):
            raise _fail(f"tools[{i}] must be {{'type': 'function', 'function': {{...}}}}", f"tools[{i}]")
        if not isinstance(fn.get("name"), str) or not fn["name"]:
            raise _fail(f"tools[{i}].function.name must be a non-empty string", f"tools[{i}].function.name")
        params = fn.get("parameters")
        if params is not None and not isinstance(params, Mapping):
            raise _fail(
                f"tools[{i}].function.parameters must be a JSON Schema object", f"tools[{i}].function.parameters"
            )
        description = fn.get("description")
        if description is not None and not isinstance(description, str):
            raise _fail(f"tools[{i}].function.description must be a string", f"tools[{i}].function.description")


def _validate_choice(body: Mapping[str, Any]) -> None:
    choice = body.get("tool_choice")
    if choice is None or choice in ("none", "auto", "required"):
        return
    if isinstance(choice, _MAP):
        if choice.get("type") == "allowed_tools":
            return
        name = (choice.get("function") or {}).get("name") if isinstance(choice.get("function"), _MAP) else None
        if isinstance(name, str):
            offered = {t["function"]["name"] for t in body.get("tools") or ()}
            if name not in offered:
                raise _fail(f"tool_choice names {name!r}, which is not in 'tools'", "tool_choice")
            return
    raise _fail("'tool_choice' must be 'none', 'auto', 'required' or name a function", "tool_choice")
