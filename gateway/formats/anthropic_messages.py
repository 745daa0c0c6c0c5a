"""Translate Anthropic Messages requests into Chat Completions bodies, and chat answers back.

The gateway's pipeline sees one shape, the chat body; this module is the only place that
knows the Messages format (``POST /v1/messages``). It is pure: dicts in, new dicts out.

Written here rather than taken from litellm's ``LiteLLMAnthropicMessagesAdapter``: that
adapter drops ``document`` blocks, moves ``defer_loading`` into the JSON schema, and
importing litellm costs seconds that serving never pays (``tests/test_lazy_imports.py``).

What survives the round trip through the chat body, and in what form:

- ``cache_control`` on system blocks, text blocks and tools stays on the chat content part
  or tool; on a ``tool_result`` (or a block inside one) it moves to the ``tool`` message
  (litellm puts it back for Anthropic upstreams, and ``place_cache_breakpoints`` counts it there).
- ``thinking``/``redacted_thinking`` blocks ride on the assistant message as
  ``thinking_blocks`` (litellm's field, which it turns back into blocks for Anthropic).
- ``defer_loading`` stays on the tool, where ``assembly/tool_modes.py`` puts its own.
- ``document`` blocks: base64 PDFs become chat ``file`` parts; plain-text and content
  documents become text parts headed by their title; URL documents become a text
  reference to the URL (the gateway never fetches).
- Lost: images inside a ``tool_result`` (chat tool messages carry text only) are
  replaced by a ``[image]`` marker; ``is_error`` becomes an ``[error]`` prefix; server
  tools (``web_search_...``) are refused, as the chat seam carries function tools only.
  ``cache_control``, thinking blocks, ``defer_loading``, ``top_k`` and ``thinking`` reach
  only providers litellm speaks Claude's format to (``CLAUDE_PROVIDERS``): OpenAI refuses
  unknown properties on messages and tools.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import orjson

from gateway.errors import RequestError

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


def _fail(message: str, param: str) -> RequestError:
    return RequestError(message, param=param, code="invalid_value")


def chat_body(request: Any, provider: str, *, server_tools: bool = False) -> dict[str, Any]:
    """The Chat Completions body that asks what the Messages ``request`` asks; RequestError if malformed.

    Server tools (``web_search_...``, the tool search tools) are refused unless ``server_tools``:
    the gateway's chat seam takes function tools only; the simulator keeps them as they are.
    """
    if not isinstance(request, Mapping):
        raise RequestError("the request body must be a JSON object", code="invalid_json")
    model, max_tokens, messages = request.get("model"), request.get("max_tokens"), request.get("messages")
    if not isinstance(model, str) or not model:
        raise _fail("'model' is required and must be a non-empty string", "model")
    if not isinstance(max_tokens, int) or isinstance(max_tokens, bool) or max_tokens < 1:
        raise _fail("'max_tokens' is required and must be a positive integer", "max_tokens")
    if not isinstance(messages, list) or not messages:
        raise _fail("'messages' is required and must be a non-empty array", "messages")
    out: list[dict[str, Any]] = _system(request.get("system"))
    for i, message in enumerate(messages):
        out.extend(_message(message, i))
    body: dict[str, Any] = {"model": model, "messages": out, "max_tokens": max_tokens}
    body.update({k: request[k] for k in _PASSED if request.get(k) is not None})
    claude = provider in CLAUDE_PROVIDERS
    if claude:
        body.update({k: request[k] for k in _ANTHROPIC_ONLY if request.get(k) is not None})
    if body.get("stream"):
        body["stream_options"] = {"include_usage": True}  # message_delta reports the usage
    stops = request.get("stop_sequences")
    if stops:
        if not isinstance(stops, list) or not all(isinstance(s, str) for s in stops):
            raise _fail("'stop_sequences' must be an array of strings", "stop_sequences")
        body["stop"] = stops
    user = (request.get("metadata") or {}).get("user_id") if isinstance(request.get("metadata"), Mapping) else None
    if isinstance(user, str) and user:
        body["user"] = user
    tools = request.get("tools")
    if tools:
        if not isinstance(tools, list):
            raise _fail("'tools' must be an array", "tools")
        body["tools"] = [_tool(t, i, server_tools) for i, t in enumerate(tools)]
    _tool_choice(request.get("tool_choice"), body)
    return body if claude else _without_claude_keys(body)


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


def _system(system: Any) -> list[dict[str, Any]]:
    if system is None or system == "" or system == []:
        return []
    if isinstance(system, str):
        return [{"role": "system", "content": system}]
    if not isinstance(system, list):
        raise _fail("'system' must be a string or an array of text blocks", "system")
    parts = []
    for i, block in enumerate(system):
        if not isinstance(block, Mapping) or block.get("type") != "text" or not isinstance(block.get("text"), str):
            raise _fail(f"system[{i}] must be a text block with a string 'text'", f"system[{i}]")
        parts.append(_text_part(block))
    return [{"role": "system", "content": parts}]


def _text_part(block: Mapping[str, Any]) -> dict[str, Any]:
    part: dict[str, Any] = {"type": "text", "text": block["text"]}
    if block.get("cache_control") is not None:
        part["cache_control"] = block["cache_control"]
    return part


def _message(message: Any, i: int) -> list[dict[str, Any]]:
    where = f"messages[{i}]"
    if not isinstance(message, Mapping) or message.get("role") not in ("user", "assistant"):
        raise _fail(f"{where} must be an object with role 'user' or 'assistant'", f"{where}.role")
    content = message.get("content")
    if isinstance(content, str):
        return [{"role": message["role"], "content": content}]
    if not isinstance(content, list):
        raise _fail(f"{where}.content must be a string or an array of content blocks", f"{where}.content")
    for j, block in enumerate(content):
        if not isinstance(block, Mapping) or not isinstance(block.get("type"), str):
            raise _fail(f"{where}.content[{j}] must be an object with a string 'type'", f"{where}.content[{j}]")
    if message["role"] == "assistant":
        return [_assistant(content, where)]
    return _user(content, where)


def _assistant(content: list[Mapping[str, Any]], where: str) -> dict[str, Any]:
    parts: list[dict[str, Any]] = []
    calls: list[dict[str, Any]] = []
    thinking: list[dict[str, Any]] = []
    for j, block in enumerate(content):
        kind = block["type"]
        if kind == "text":
            parts.append(_text_part(block))
        elif kind == "tool_use":
            if not isinstance(block.get("id"), str) or not isinstance(block.get("name"), str):
                raise _fail(f"{where}.content[{j}] needs a string 'id' and 'name'", f"{where}.content[{j}]")
            arguments = orjson.dumps(block.get("input") or {}).decode()
            calls.append(
                {"id": block["id"], "type": "function", "function": {"name": block["name"], "arguments": arguments}}
            )
        elif kind in ("thinking", "redacted_thinking"):
            thinking.append(dict(block))
        else:
            raise _fail(
                f"{where}.content[{j}] of type {kind!r} cannot appear in an assistant turn", f"{where}.content[{j}]"
            )
    plain = len(parts) == 1 and "cache_control" not in parts[0]
    out: dict[str, Any] = {"role": "assistant", "content": parts[0]["text"] if plain else (parts or None)}
    if out["content"] is None and not calls:
        out["content"] = ""
    if calls:
        out["tool_calls"] = calls
    if thinking:
        out["thinking_blocks"] = thinking
    return out


def _user(content: list[Mapping[str, Any]], where: str) -> list[dict[str, Any]]:
    """Tool results first (chat needs them right after the calls), then the rest as one user message."""
    results: list[dict[str, Any]] = []
    parts: list[dict[str, Any]] = []
    for j, block in enumerate(content):
        kind = block["type"]
        if kind == "tool_result":
            if not isinstance(block.get("tool_use_id"), str):
                raise _fail(f"{where}.content[{j}].tool_use_id must be a string", f"{where}.content[{j}].tool_use_id")
            results.append(_tool_result(block, f"{where}.content[{j}]"))
        elif kind == "text":
            if not isinstance(block.get("text"), str):
                raise _fail(f"{where}.content[{j}].text must be a string", f"{where}.content[{j}].text")
            parts.append(_text_part(block))
        elif kind == "image":
            parts.append(_image(block, f"{where}.content[{j}]"))
        elif kind == "document":
            parts.append(_document(block, f"{where}.content[{j}]"))
        else:
            raise _fail(f"{where}.content[{j}] of type {kind!r} cannot appear in a user turn", f"{where}.content[{j}]")
    if parts:
        results.append({"role": "user", "content": parts})
    return results


def _tool_result(block: Mapping[str, Any], where: str) -> dict[str, Any]:
    content = block.get("content")
    if content is None:
        text = ""
    elif isinstance(content, str):
        text = content
    elif isinstance(content, list):
        pieces = []
        for item in content:
            kind = item.get("type") if isinstance(item, Mapping) else None
            pieces.append(str(item.get("text", "")) if kind == "text" else "[image]" if kind == "image" else "")
        text = "\n".join(p for p in pieces if p)
    else:
        raise _fail(f"{where}.content must be a string or an array of blocks", f"{where}.content")
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


def _image(block: Mapping[str, Any], where: str) -> dict[str, Any]:
    source = block.get("source")
    if isinstance(source, Mapping) and source.get("type") == "base64":
        url = f"data:{source.get('media_type', 'image/png')};base64,{source.get('data', '')}"
    elif isinstance(source, Mapping) and source.get("type") == "url" and isinstance(source.get("url"), str):
        url = source["url"]
    else:
        raise _fail(f"{where}.source must be a base64 or url image source", f"{where}.source")
    part: dict[str, Any] = {"type": "image_url", "image_url": {"url": url}}
    if block.get("cache_control") is not None:
        part["cache_control"] = block["cache_control"]
    return part


def _document(block: Mapping[str, Any], where: str) -> dict[str, Any]:
    found = block.get("source")
    source: Mapping[str, Any] = found if isinstance(found, Mapping) else {}
    title = block.get("title") if isinstance(block.get("title"), str) else None
    kind = source.get("type")
    part: dict[str, Any]
    if kind == "base64":
        data = f"data:{source.get('media_type', 'application/pdf')};base64,{source.get('data', '')}"
        part = {"type": "file", "file": {"file_data": data, "filename": title or "document.pdf"}}
    elif kind == "text" and isinstance(source.get("data"), str):
        part = {"type": "text", "text": (f"{title}\n\n" if title else "") + source["data"]}
    elif kind == "content" and isinstance(source.get("content"), list | str):
        inner = source["content"]
        text = (
            inner
            if isinstance(inner, str)
            else "\n".join(str(b.get("text", "")) for b in inner if isinstance(b, Mapping))
        )
        part = {"type": "text", "text": (f"{title}\n\n" if title else "") + text}
    elif kind == "url" and isinstance(source.get("url"), str):
        part = {"type": "text", "text": f"[document: {title + ' ' if title else ''}{source['url']}]"}
    else:
        raise _fail(f"{where}.source must be a base64, text, content or url document source", f"{where}.source")
    if block.get("cache_control") is not None:
        part["cache_control"] = block["cache_control"]
    return part


def _tool(tool: Any, i: int, server_tools: bool = False) -> dict[str, Any]:
    if not isinstance(tool, Mapping) or not isinstance(tool.get("name"), str) or not tool["name"]:
        raise _fail(f"tools[{i}] must be an object with a non-empty string 'name'", f"tools[{i}]")
    if tool.get("type") not in (None, "custom") and server_tools:
        return dict(tool)
    if tool.get("type") not in (None, "custom"):
        raise _fail(
            f"tools[{i}] is a server tool ({tool['type']!r}); this gateway forwards custom tools only",
            f"tools[{i}].type",
        )
    schema = tool.get("input_schema")
    if not isinstance(schema, Mapping):
        raise _fail(f"tools[{i}].input_schema must be a JSON Schema object", f"tools[{i}].input_schema")
    fn: dict[str, Any] = {"name": tool["name"], "parameters": schema}
    if isinstance(tool.get("description"), str):
        fn["description"] = tool["description"]
    out: dict[str, Any] = {"type": "function", "function": fn}
    for key in ("cache_control", "defer_loading"):
        if tool.get(key) is not None:
            out[key] = tool[key]
    return out


def _tool_choice(choice: Any, body: dict[str, Any]) -> None:
    if choice is None:
        return
    kind = choice.get("type") if isinstance(choice, Mapping) else None
    if kind == "tool" and isinstance(choice.get("name"), str):
        body["tool_choice"] = {"type": "function", "function": {"name": choice["name"]}}
    elif isinstance(kind, str) and kind in _CHOICES:
        body["tool_choice"] = _CHOICES[kind]
    else:
        raise _fail(
            "'tool_choice' must be {'type': 'auto' | 'any' | 'none'} or {'type': 'tool', 'name': ...}", "tool_choice"
        )
    if choice.get("disable_parallel_tool_use") and body.get("tools"):
        body["parallel_tool_calls"] = False


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
