"""Translate Anthropic Messages requests into Chat Completions bodies, and chat answers back.

The gateway's pipeline sees one shape, the chat body; this module is the only place that
knows the Messages format (``POST /v1/messages``). It is pure: dicts in, new dicts out.

Written here rather than taken from litellm's ``LiteLLMAnthropicMessagesAdapter``: that
adapter drops ``document`` blocks, moves ``defer_loading`` into the JSON schema, and
importing litellm costs seconds that serving never pays (``tests/test_lazy_imports.py``).

Two uses, one translation:

- **The view** (``native=True``): toward an upstream that speaks Messages itself (and in the
  simulator), the chat body is only what the assembly passes reason over. Every block is
  accepted (server tools and their result blocks, ``tool_reference``, ``search_result``,
  citations, unknown blocks), each view message and tool carries ``ORIGIN`` (where in the
  client's body it came from), and ``formats.messages_apply`` puts the passes' result back
  onto the client's own body. Blocks the chat shape has no field for are text parts in the
  view (so they are counted), never forwarded from it.
- **Crossing** (``native=False``): the chat body *is* what an OpenAI-compatible upstream
  receives. What crosses, and what is lost, is listed in docs/messages.md; a block that
  cannot cross without changing the request's meaning (server tools and their results,
  unknown blocks) is refused with a 400 naming it.

In both: ``cache_control`` on system blocks, text blocks and tools stays on the chat part or
tool; on a ``tool_result`` (or a block inside one) it moves to the ``tool`` message.
``thinking``/``redacted_thinking`` blocks ride on the assistant message as ``thinking_blocks``.
A ``role: "system"`` message inside ``messages`` (Claude Code sends them, with the
``mid-conversation-system`` beta) is a system message at that place. ``is_error`` is an
``[error] `` prefix, ``tool_reference`` a ``[tool loaded: name]`` line, images inside a
``tool_result`` a ``[image]`` marker. ``cache_control``, thinking blocks, ``defer_loading``,
``top_k`` and ``thinking`` reach only providers litellm speaks Claude's format to
(``CLAUDE_PROVIDERS``): OpenAI refuses unknown properties on messages and tools.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import orjson

from gateway.errors import RequestError
from gateway.formats.anthropic_blocks import document, fail, image, other_part, text_part, tool_result_text

STOP_REASONS: Mapping[str | None, str] = {
    "stop": "end_turn",
    "length": "max_tokens",
    "tool_calls": "tool_use",
    "function_call": "tool_use",
    "content_filter": "refusal",
}
_CHOICES: Mapping[str, str] = {"auto": "auto", "any": "required", "none": "none"}
_PASSED = ("temperature", "top_p", "stream")
#: Providers litellm sends Claude's own request format (the ``place_cache_breakpoints`` list).
CLAUDE_PROVIDERS = frozenset({"anthropic", "bedrock", "vertex_ai"})
#: Parameters only those understand; an OpenAI upstream would refuse them.
_ANTHROPIC_ONLY = ("top_k", "thinking")
#: Keys on messages, content parts and tools that only those understand (OpenAI refuses
#: unknown properties there); for other providers they are dropped.
_CLAUDE_KEYS = frozenset({"cache_control", "thinking_blocks", "defer_loading"})


#: The key each view message and tool carries in a native view: where in the client's body it came
#: from (``[message index, block index]``, ``-1`` for the top-level ``system`` or the message's
#: non-``tool_result`` blocks; ``[tool index]`` on tools). ``formats.messages_apply`` reads it back.
ORIGIN = "x-ventana-origin"
#: Block types an assistant turn carries that become chat fields rather than content parts.
_ASSISTANT_FIELDS = frozenset({"tool_use", "thinking", "redacted_thinking"})


def chat_body(request: Any, provider: str, *, native: bool = False) -> dict[str, Any]:
    """The Chat Completions body that asks what the Messages ``request`` asks; RequestError if malformed.

    ``native``: the body is the view of a request that goes to a Messages upstream as the client's
    own body (or the simulator's reading of one): every block and tool is accepted and tagged with
    ``ORIGIN``. Otherwise it crosses to a chat upstream, and what cannot cross is refused by name.
    """
    if not isinstance(request, Mapping):
        raise RequestError("the request body must be a JSON object", code="invalid_json")
    model, max_tokens, messages = request.get("model"), request.get("max_tokens"), request.get("messages")
    if not isinstance(model, str) or not model:
        raise fail("'model' is required and must be a non-empty string", "model")
    if not isinstance(max_tokens, int) or isinstance(max_tokens, bool) or max_tokens < 1:
        raise fail("'max_tokens' is required and must be a positive integer", "max_tokens")
    if not isinstance(messages, list) or not messages:
        raise fail("'messages' is required and must be a non-empty array", "messages")
    out: list[dict[str, Any]] = _system(request.get("system"), native)
    for i, message in enumerate(messages):
        out.extend(message_view(message, i, native))
    body: dict[str, Any] = {"model": model, "messages": out, "max_tokens": max_tokens}
    body.update({k: request[k] for k in _PASSED if request.get(k) is not None})
    claude = native or provider in CLAUDE_PROVIDERS
    if claude:
        body.update({k: request[k] for k in _ANTHROPIC_ONLY if request.get(k) is not None})
    if native and isinstance(request.get("cache_control"), Mapping):
        # Automatic caching (a top-level marker): it stays on the client's body, and may take one of the
        # request's four breakpoint slots, so the view carries it for ``place_cache_breakpoints`` to count.
        body["cache_control"] = dict(request["cache_control"])
    if body.get("stream"):
        body["stream_options"] = {"include_usage": True}  # message_delta reports the usage
    stops = request.get("stop_sequences")
    if stops:
        if not isinstance(stops, list) or not all(isinstance(s, str) for s in stops):
            raise fail("'stop_sequences' must be an array of strings", "stop_sequences")
        body["stop"] = stops
    user = (request.get("metadata") or {}).get("user_id") if isinstance(request.get("metadata"), Mapping) else None
    if isinstance(user, str) and user:
        body["user"] = user
    tools = request.get("tools")
    if tools:
        if not isinstance(tools, list):
            raise fail("'tools' must be an array", "tools")
        body["tools"] = [_tool(t, i, native) for i, t in enumerate(tools)]
    _tool_choice(request.get("tool_choice"), body)
    if not native:  # a native request keeps its own output_config, for the provider to judge
        _output_format(request.get("output_config"), body)
    return body if claude else _without_claude_keys(body)


def without_origins(body: dict[str, Any]) -> dict[str, Any]:
    """``body`` with its view's ``ORIGIN`` tags removed (the simulator reads a view as a plain chat body)."""
    body["messages"] = [{k: v for k, v in m.items() if k != ORIGIN} for m in body["messages"]]
    if "tools" in body:
        body["tools"] = [{k: v for k, v in t.items() if k != ORIGIN} for t in body["tools"]]
    return body


def _without_claude_keys(body: dict[str, Any]) -> dict[str, Any]:
    def clean(item: Any) -> Any:
        if not isinstance(item, dict):
            return item
        out = {k: v for k, v in item.items() if k not in _CLAUDE_KEYS}
        if isinstance(out.get("content"), list):
            out["content"] = [clean(p) for p in out["content"]]
        return out

    body["messages"] = [clean(m) for m in body["messages"]]
    if "tools" in body:
        body["tools"] = [clean(t) for t in body["tools"]]
    return body


def _tagged(message: dict[str, Any], native: bool, *origin: int) -> dict[str, Any]:
    if native:
        message[ORIGIN] = list(origin)
    return message


def _system(system: Any, native: bool) -> list[dict[str, Any]]:
    if system is None or system == "" or system == []:
        return []
    if isinstance(system, str):
        return [_tagged({"role": "system", "content": system}, native, -1, -1)]
    if not isinstance(system, list):
        raise fail("'system' must be a string or an array of text blocks", "system")
    parts = []
    for i, block in enumerate(system):
        if not isinstance(block, Mapping) or block.get("type") != "text" or not isinstance(block.get("text"), str):
            raise fail(f"system[{i}] must be a text block with a string 'text'", f"system[{i}]")
        parts.append(text_part(block))
    return [_tagged({"role": "system", "content": parts}, native, -1, -1)]


def message_view(message: Any, i: int, native: bool) -> list[dict[str, Any]]:
    """The chat messages ``messages[i]`` becomes: one, or a user turn's tool results then its other blocks."""
    where = f"messages[{i}]"
    if not isinstance(message, Mapping) or message.get("role") not in ("user", "assistant", "system"):
        raise fail(f"{where} must be an object with role 'user', 'assistant' or 'system'", f"{where}.role")
    content = message.get("content")
    role = message["role"]
    if isinstance(content, str):
        return [_tagged({"role": role, "content": content}, native, i, -1)]
    if not isinstance(content, list):
        raise fail(f"{where}.content must be a string or an array of content blocks", f"{where}.content")
    for j, block in enumerate(content):
        if not isinstance(block, Mapping) or not isinstance(block.get("type"), str):
            raise fail(f"{where}.content[{j}] must be an object with a string 'type'", f"{where}.content[{j}]")
    if role == "assistant":
        return [_tagged(_assistant(content, where, native), native, i, -1)]
    return _user(content, where, native, i, role)


def _assistant(content: list[Mapping[str, Any]], where: str, native: bool) -> dict[str, Any]:
    parts: list[dict[str, Any]] = []
    calls: list[dict[str, Any]] = []
    thinking: list[dict[str, Any]] = []
    for j, block in enumerate(content):
        kind = block["type"]
        if kind == "text":
            parts.append(text_part(block))
        elif kind == "tool_use":
            if not isinstance(block.get("id"), str) or not isinstance(block.get("name"), str):
                raise fail(f"{where}.content[{j}] needs a string 'id' and 'name'", f"{where}.content[{j}]")
            arguments = orjson.dumps(block.get("input") or {}).decode()
            calls.append(
                {"id": block["id"], "type": "function", "function": {"name": block["name"], "arguments": arguments}}
            )
        elif kind in ("thinking", "redacted_thinking"):
            thinking.append(dict(block))
        elif kind in ("tool_result", "image", "document") and not native:
            raise fail(
                f"{where}.content[{j}] of type {kind!r} cannot appear in an assistant turn", f"{where}.content[{j}]"
            )
        else:  # server tool calls and results, unknown blocks: text in the view, refused when crossing
            parts.append(other_part(block, f"{where}.content[{j}]", native))
    plain = len(parts) == 1 and "cache_control" not in parts[0]
    out: dict[str, Any] = {"role": "assistant", "content": parts[0]["text"] if plain else (parts or None)}
    if out["content"] is None and not calls:
        out["content"] = ""
    if calls:
        out["tool_calls"] = calls
    if thinking:
        out["thinking_blocks"] = thinking
    return out


def _user(content: list[Mapping[str, Any]], where: str, native: bool, i: int, role: str) -> list[dict[str, Any]]:
    """Tool results first (chat needs them right after the calls), then the rest as one message of ``role``."""
    results: list[dict[str, Any]] = []
    parts: list[dict[str, Any]] = []
    for j, block in enumerate(content):
        kind, at = block["type"], f"{where}.content[{j}]"
        if kind == "tool_result" and role == "user":
            if not isinstance(block.get("tool_use_id"), str):
                raise fail(f"{at}.tool_use_id must be a string", f"{at}.tool_use_id")
            results.append(_tagged(_tool_result(block, at, native), native, i, j))
        elif kind == "text":
            if not isinstance(block.get("text"), str):
                raise fail(f"{at}.text must be a string", f"{at}.text")
            parts.append(text_part(block))
        elif kind == "image":
            parts.append(image(block, at))
        elif kind == "document":
            parts.append(document(block, at))
        elif kind in _ASSISTANT_FIELDS and not native:
            raise fail(f"{at} of type {kind!r} cannot appear in a {role} turn", at)
        else:
            parts.append(other_part(block, at, native or kind == "search_result"))
    if parts or not results:
        results.append(_tagged({"role": role, "content": parts}, native, i, -1))
    return results


def _tool_result(block: Mapping[str, Any], where: str, native: bool) -> dict[str, Any]:
    content = block.get("content")
    text = tool_result_text(content, where, native)
    if block.get("is_error"):
        text = "[error] " + text
    out: dict[str, Any] = {"role": "tool", "tool_call_id": block["tool_use_id"], "content": text}
    # A breakpoint may sit on the result or on a block inside it (litellm writes the latter):
    # either way it marks the end of this result, which the tool message now is.
    inner = [b.get("cache_control") for b in content if isinstance(b, Mapping)] if isinstance(content, list) else []
    marker = block.get("cache_control") or next((c for c in reversed(inner) if c), None)
    if marker is not None:
        out["cache_control"] = marker
    return out


def _tool(tool: Any, i: int, native: bool = False) -> dict[str, Any]:
    if not isinstance(tool, Mapping) or not isinstance(tool.get("name"), str) or not tool["name"]:
        raise fail(f"tools[{i}] must be an object with a non-empty string 'name'", f"tools[{i}]")
    if tool.get("type") not in (None, "custom") and native:
        return _tagged(dict(tool), native, i)
    if tool.get("type") not in (None, "custom"):
        raise fail(
            f"tools[{i}] is a server tool ({tool['type']!r}), which only Anthropic runs; "
            "send it to an anthropic/ model",
            f"tools[{i}].type",
        )
    schema = tool.get("input_schema")
    if not isinstance(schema, Mapping):
        raise fail(f"tools[{i}].input_schema must be a JSON Schema object", f"tools[{i}].input_schema")
    fn: dict[str, Any] = {"name": tool["name"], "parameters": schema}
    if isinstance(tool.get("description"), str):
        fn["description"] = tool["description"]
    out: dict[str, Any] = {"type": "function", "function": fn}
    for key in ("cache_control", "defer_loading"):
        if tool.get(key) is not None:
            out[key] = tool[key]
    return _tagged(out, native, i)


def _tool_choice(choice: Any, body: dict[str, Any]) -> None:
    if choice is None:
        return
    kind = choice.get("type") if isinstance(choice, Mapping) else None
    if kind == "tool" and isinstance(choice.get("name"), str):
        body["tool_choice"] = {"type": "function", "function": {"name": choice["name"]}}
    elif isinstance(kind, str) and kind in _CHOICES:
        body["tool_choice"] = _CHOICES[kind]
    else:
        raise fail(
            "'tool_choice' must be {'type': 'auto' | 'any' | 'none'} or {'type': 'tool', 'name': ...}", "tool_choice"
        )
    if choice.get("disable_parallel_tool_use") and body.get("tools"):
        body["parallel_tool_calls"] = False


def _output_format(config: Any, body: dict[str, Any]) -> None:
    """``output_config.format`` (structured outputs: the answer follows a JSON schema) as Chat Completions'
    ``response_format``, so an answer meant for a parser is not free text on a chat upstream. Not
    ``strict``: OpenAI's strict mode refuses schemas Anthropic accepts (optional properties, for one).
    ``effort`` has no chat field and is dropped (docs/messages.md)."""
    if config is None:
        return
    if not isinstance(config, Mapping):
        raise fail("'output_config' must be an object", "output_config")
    fmt = config.get("format")
    if fmt is None:
        return
    if not isinstance(fmt, Mapping) or fmt.get("type") != "json_schema" or not isinstance(fmt.get("schema"), Mapping):
        raise fail(
            '\'output_config.format\' must be an object with "type": "json_schema" and a "schema" object',
            "output_config.format",
        )
    body["response_format"] = {"type": "json_schema", "json_schema": {"name": "output", "schema": dict(fmt["schema"])}}


def usage_of(usage: Any) -> dict[str, int]:
    """Anthropic usage from a chat usage block: ``input_tokens`` counts neither cache reads nor writes."""
    usage = usage if isinstance(usage, Mapping) else {}
    details = usage.get("prompt_tokens_details") if isinstance(usage.get("prompt_tokens_details"), Mapping) else {}
    read = _int(usage.get("cache_read_input_tokens")) or _int(details.get("cached_tokens"))
    write = _int(usage.get("cache_creation_input_tokens"))
    return {
        "input_tokens": max(0, _int(usage.get("prompt_tokens")) - read - write),
        "output_tokens": _int(usage.get("completion_tokens")),
        "cache_read_input_tokens": read,
        "cache_creation_input_tokens": write,
    }


def _int(value: Any) -> int:
    return int(value) if isinstance(value, int | float) and not isinstance(value, bool) else 0


def tool_input(arguments: Any) -> Any:
    """A tool call's arguments as the ``input`` object; text that is not a JSON object is kept under ``_raw``."""
    if isinstance(arguments, Mapping):
        return dict(arguments)
    try:
        parsed = orjson.loads(arguments or "{}")
    except (orjson.JSONDecodeError, TypeError):
        return {"_raw": arguments}
    return parsed if isinstance(parsed, dict) else {"_raw": arguments}


def message_id(chat_id: Any) -> str:
    return "msg_" + str(chat_id or "ventana").removeprefix("chatcmpl-")


def message_from_chat(data: Mapping[str, Any], model: str) -> dict[str, Any]:
    """The Messages response for a chat completion ``data``."""
    choice = (data.get("choices") or [{}])[0]
    chat = choice.get("message") or {}
    content: list[dict[str, Any]] = [dict(b) for b in chat.get("thinking_blocks") or () if isinstance(b, Mapping)]
    if chat.get("content"):
        content.append({"type": "text", "text": chat["content"]})
    for call in chat.get("tool_calls") or ():
        fn = call.get("function") or {}
        content.append(
            {"type": "tool_use", "id": call.get("id"), "name": fn.get("name"), "input": tool_input(fn.get("arguments"))}
        )
    return {
        "id": message_id(data.get("id")),
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": content,
        "stop_reason": STOP_REASONS.get(choice.get("finish_reason"), "end_turn"),
        "stop_sequence": None,
        "usage": usage_of(data.get("usage")),
    }


ERROR_TYPES: Mapping[int, str] = {
    400: "invalid_request_error",
    401: "authentication_error",
    402: "billing_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
    504: "timeout_error",
    529: "overloaded_error",
}


def error_body(status: int, message: str) -> dict[str, Any]:
    """Anthropic's error shape; statuses it does not name are ``api_error`` (its 500)."""
    kind = ERROR_TYPES.get(status, "invalid_request_error" if 400 <= status < 500 else "api_error")
    return {"type": "error", "error": {"type": kind, "message": message}}
