"""A Responses API request as a Chat Completions body (the answer side is ``responses_answer``).

The Responses front door owns no pipeline of its own: a request's items (plus the stored
conversation ``previous_response_id`` names) become chat messages, the chat pipeline
assembles and forwards them, and the answer's message becomes output items again. The
translation must be stable: the items of turn N, translated again on turn N+1, give the
same messages byte for byte, or the session's history would not be recognised and the
provider's prefix cache would miss.

Why not litellm's ``litellm.responses`` transformation: it turns requests into its own
typed ``ModelResponse`` objects and session machinery (4,000 lines bound to its provider
dispatch), while the gateway needs plain dicts to hand to ``answer_chat`` and back, with
the ids under its own control.

What chat cannot carry is refused with a 400 naming the field (``background``, ``conversation``,
prompt templates, a ``tool_choice`` naming a hosted tool), with two exceptions clients rely on:
``reasoning`` items are kept in the stored conversation (so ``input_items`` returns them) and
left out of the chat messages, and hosted tools (``web_search``, ...; Codex always sends one)
are left out of the chat tools and named in the answer's ``x-ventana-unserved-tools`` header.
A ``namespace`` tool's functions are offered by their own names.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from gateway.errors import RequestError

#: Request fields with the same name and meaning in both APIs.
SAME_PARAMS = (
    "temperature",
    "top_p",
    "user",
    "parallel_tool_calls",
    "service_tier",
    "safety_identifier",
    "prompt_cache_key",
)
#: Request fields the chat route cannot serve: asking for them is an error, not silently ignored.
REFUSED_PARAMS = ("background", "conversation", "prompt")
_PART_TYPES = {"input_text": "text", "output_text": "text", "text": "text"}


def _fail(message: str, param: str) -> RequestError:
    return RequestError(message, param=param, code="invalid_value")


def check_request(request: Any) -> Mapping[str, Any]:
    """The request, if it is a Responses body this route can serve; else a RequestError naming the field."""
    if not isinstance(request, Mapping):
        raise RequestError("the request body must be a JSON object", code="invalid_json")
    if not isinstance(request.get("model"), str) or not request["model"]:
        raise _fail("'model' is required and must be a non-empty string", "model")
    given = request.get("input")
    if not isinstance(given, str | list):
        raise _fail("'input' is required and must be a string or an array of items", "input")
    for name in REFUSED_PARAMS:
        if request.get(name):
            raise _fail(f"'{name}' is not supported by Ventana's Responses route; found {request[name]!r}", name)
    for name in ("previous_response_id", "instructions"):
        if request.get(name) is not None and not isinstance(request[name], str):
            raise _fail(f"'{name}' must be a string", name)
    for name in ("stream", "store", "parallel_tool_calls"):
        if request.get(name) is not None and not isinstance(request[name], bool):
            raise _fail(f"'{name}' must be a boolean; found {request[name]!r}", name)
    limit = request.get("max_output_tokens")
    if limit is not None and (not isinstance(limit, int) or isinstance(limit, bool) or limit < 1):
        raise _fail("'max_output_tokens' must be a positive integer", "max_output_tokens")
    _check_metadata(request.get("metadata"))
    return request


#: The API's bounds on ``metadata``: at most 16 pairs, keys up to 64 characters, values up to 512.
METADATA_PAIRS, METADATA_KEY_CHARS, METADATA_VALUE_CHARS = 16, 64, 512


def _check_metadata(metadata: Any) -> None:
    """``metadata`` is echoed in the Response and stored with it, after the provider has answered
    (and billed): a wrong type or a deep nesting found only then was a 500 for a paid answer, so it
    is checked here, before forwarding, with the API's own bounds (string keys, string values)."""
    if metadata is None:
        return
    if not isinstance(metadata, Mapping):
        raise _fail(
            f"'metadata' must be an object of string keys and values; found {type(metadata).__name__}", "metadata"
        )
    if len(metadata) > METADATA_PAIRS:
        raise _fail(f"'metadata' has {len(metadata)} pairs; at most {METADATA_PAIRS}", "metadata")
    for key, value in metadata.items():
        if len(key) > METADATA_KEY_CHARS:
            raise _fail(f"'metadata' keys are at most {METADATA_KEY_CHARS} characters", "metadata")
        if not isinstance(value, str) or len(value) > METADATA_VALUE_CHARS:
            raise _fail(
                f"'metadata.{key[:METADATA_KEY_CHARS]}' must be a string of at most {METADATA_VALUE_CHARS} characters",
                "metadata",
            )


def input_items(
    request: Mapping[str, Any], response_id: str, earlier: Sequence[Mapping[str, Any]] = ()
) -> list[dict[str, Any]]:
    """This request's input as items, each with an id (``input_items`` lists them by id).

    An ``item_reference`` is replaced by the item of ``earlier`` (the stored conversation) it names."""
    given = request["input"]
    if isinstance(given, str):
        given = [{"type": "message", "role": "user", "content": given}]
    items: list[dict[str, Any]] = []
    for i, item in enumerate(given):
        if not isinstance(item, Mapping):
            raise _fail(f"input[{i}] must be an object, found {type(item).__name__}", f"input[{i}]")
        kind = item.get("type") or ("message" if "role" in item else None)
        if kind == "item_reference":
            items.append(_referenced(item.get("id"), earlier, i))
            continue
        prefix = "msg" if kind == "message" else "item"
        items.append({**item, "type": kind, "id": item.get("id") or f"{prefix}_{response_id[5:]}_{i}"})
    return items


def _referenced(item_id: Any, earlier: Sequence[Mapping[str, Any]], i: int) -> dict[str, Any]:
    found = next((item for item in reversed(earlier) if item.get("id") == item_id), None)
    if found is None:
        raise _fail(
            f"input[{i}] references item {item_id!r}, which is not in the conversation previous_response_id names",
            f"input[{i}].id",
        )
    return dict(found)


def chat_body(request: Mapping[str, Any], items: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """The Chat Completions body for ``request`` over the whole conversation ``items``."""
    messages: list[dict[str, Any]] = []
    if request.get("instructions"):
        messages.append({"role": "system", "content": request["instructions"]})
    messages.extend(chat_messages(items))
    body: dict[str, Any] = {"model": request["model"], "messages": messages}
    body.update({name: request[name] for name in SAME_PARAMS if request.get(name) is not None})
    if request.get("max_output_tokens") is not None:
        body["max_completion_tokens"] = request["max_output_tokens"]
    if request.get("tools"):
        served = [fn for i, t in enumerate(request["tools"]) for fn in _chat_tools(t, i)]
        if served:
            body["tools"] = served
    if request.get("tool_choice") is not None and "tools" in body:  # chat refuses a choice among no tools
        body["tool_choice"] = _chat_tool_choice(request["tool_choice"])
    text = request.get("text") or {}
    if isinstance(text, Mapping):
        body.update(_response_format(text.get("format")))
        if text.get("verbosity"):
            body["verbosity"] = text["verbosity"]
    effort = (request.get("reasoning") or {}).get("effort") if isinstance(request.get("reasoning"), Mapping) else None
    if effort:
        body["reasoning_effort"] = effort
    if request.get("top_logprobs"):
        body.update(logprobs=True, top_logprobs=request["top_logprobs"])
    if request.get("stream"):
        body["stream"] = True
        body["stream_options"] = {"include_usage": True}
    return body


def chat_messages(items: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Chat messages for Responses items: consecutive function calls join one assistant message."""
    return chat_messages_at(items)[0]


def chat_messages_at(items: Sequence[Mapping[str, Any]]) -> tuple[list[dict[str, Any]], list[list[int]]]:
    """``chat_messages`` and, for each message, the positions in ``items`` it was made from.

    A ``reasoning`` item belongs to the message after it (the answer it reasoned toward); one
    at the very end belongs to the last message. ``responses_edits`` applies what the passes
    decided about a message to these items."""
    messages: list[dict[str, Any]] = []
    positions: list[list[int]] = []
    pending: list[int] = []  # reasoning items waiting for the message they precede
    open_assistant = False  # the last message is an assistant turn later function calls may join
    for i, item in enumerate(items):
        kind = item.get("type") or ("message" if "role" in item else None)
        if kind == "message":
            messages.append(_chat_message(item, i))
            positions.append([*pending, i])
            open_assistant = messages[-1]["role"] == "assistant"
        elif kind == "function_call":
            call = {
                "id": _string(item, "call_id", i),
                "type": "function",
                "function": {"name": _string(item, "name", i), "arguments": item.get("arguments") or ""},
            }
            if open_assistant:
                messages[-1].setdefault("tool_calls", []).append(call)
                positions[-1].extend((*pending, i))
            else:
                messages.append({"role": "assistant", "content": None, "tool_calls": [call]})
                positions.append([*pending, i])
                open_assistant = True
        elif kind == "function_call_output":
            output = item.get("output")
            content = output if isinstance(output, str) else _joined_text(output, i)
            messages.append({"role": "tool", "tool_call_id": _string(item, "call_id", i), "content": content})
            positions.append([*pending, i])
            open_assistant = False
        elif kind == "reasoning":
            pending.append(i)  # chat has no field for it; the stored conversation keeps it
            continue
        else:
            raise _fail(
                f"input[{i}] has type {kind!r}; this route serves message, function_call, "
                "function_call_output and reasoning items",
                f"input[{i}].type",
            )
        pending = []
    if pending and positions:
        positions[-1].extend(pending)
    return messages, positions


def _string(item: Mapping[str, Any], key: str, i: int) -> str:
    value = item.get(key)
    if not isinstance(value, str) or not value:
        raise _fail(f"input[{i}].{key} must be a non-empty string", f"input[{i}].{key}")
    return value


def _chat_message(item: Mapping[str, Any], i: int) -> dict[str, Any]:
    role = item.get("role")
    if role not in ("user", "assistant", "system", "developer"):
        raise _fail(f"input[{i}].role must be user, assistant, system or developer; found {role!r}", f"input[{i}].role")
    content = item.get("content")
    if isinstance(content, str):
        return {"role": role, "content": content}
    if not isinstance(content, list):
        raise _fail(f"input[{i}].content must be a string or an array of parts", f"input[{i}].content")
    if role == "assistant":  # output_text and refusal parts: the chat answer they came from was one string
        return {"role": role, "content": _joined_text(content, i)}
    return {"role": role, "content": [_chat_part(p, i, j) for j, p in enumerate(content)]}


def _chat_part(part: Any, i: int, j: int) -> dict[str, Any]:
    where = f"input[{i}].content[{j}]"
    kind = part.get("type") if isinstance(part, Mapping) else None
    if kind in _PART_TYPES:
        return {"type": "text", "text": part.get("text") or ""}
    if kind == "input_image":
        if not part.get("image_url"):
            raise _fail(f"{where} needs an image_url (file ids need the provider's files API)", where)
        return {"type": "image_url", "image_url": {"url": part["image_url"], "detail": part.get("detail") or "auto"}}
    if kind == "input_file":
        fields = ("file_data", "file_id", "filename")
        return {"type": "file", "file": {k: part[k] for k in fields if part.get(k) is not None}}
    raise _fail(f"{where} has type {kind!r}; expected input_text, input_image or input_file", where)


def _joined_text(parts: Any, i: int) -> str:
    if not isinstance(parts, list):
        raise _fail(f"input[{i}] content must be a string or an array of text parts", f"input[{i}]")
    return "".join(str(p.get("text") or p.get("refusal") or "") for p in parts if isinstance(p, Mapping))


def _chat_tools(tool: Any, i: int) -> list[dict[str, Any]]:
    """The chat function tools for one Responses tool: a namespace's functions by their own names; none
    for a hosted tool (``unserved_tools`` names those)."""
    if not isinstance(tool, Mapping) or not isinstance(tool.get("type"), str):
        raise _fail(f"tools[{i}] must be an object with a 'type'", f"tools[{i}]")
    if tool["type"] == "namespace":
        return [fn for j, inner in enumerate(tool.get("tools") or ()) for fn in _chat_tools(inner, i * 1000 + j)]
    if tool["type"] != "function":
        return []
    if not isinstance(tool.get("name"), str) or not tool["name"]:
        raise _fail(f"tools[{i}].name must be a non-empty string", f"tools[{i}].name")
    fn = {k: tool[k] for k in ("name", "description", "parameters", "strict") if tool.get(k) is not None}
    return [{"type": "function", "function": fn}]


#: Request fields the chat translation reads (or Ventana itself serves: ``store``, ``metadata``,
#: ``previous_response_id``); every other field cannot cross to a chat upstream.
TRANSLATED = frozenset(
    {
        "model",
        "input",
        "instructions",
        "tools",
        "tool_choice",
        "text",
        "reasoning",
        "max_output_tokens",
        "top_logprobs",
        "stream",
        "store",
        "metadata",
        "previous_response_id",
        *SAME_PARAMS,
    }
)
_TRANSLATED_PARTS = {"reasoning": ("effort",), "text": ("format", "verbosity")}


def untranslated_fields(request: Mapping[str, Any]) -> list[str]:
    """The request's fields a chat upstream never sees (``include``, ``truncation``, ``reasoning.summary``,
    fields Ventana does not know): the translated route names them in ``x-ventana-untranslated``."""
    out = [name for name in request if name not in TRANSLATED and request[name] is not None]
    for name, kept in _TRANSLATED_PARTS.items():
        value = request.get(name)
        if isinstance(value, Mapping):
            out += [f"{name}.{k}" for k in value if k not in kept and value[k] is not None]
    return out


def unserved_tools(request: Mapping[str, Any]) -> list[str]:
    """The types of the request's hosted tools (web_search, file_search, ...): a provider behind chat
    cannot run them, so they are left out and the answer's ``x-ventana-unserved-tools`` header names them."""
    tools = request.get("tools") or ()
    return [
        str(t.get("type")) for t in tools if isinstance(t, Mapping) and t.get("type") not in ("function", "namespace")
    ]


def _chat_tool_choice(choice: Any) -> Any:
    if isinstance(choice, str):
        return choice
    if isinstance(choice, Mapping) and choice.get("type") == "function":
        return {"type": "function", "function": {"name": choice.get("name")}}
    if isinstance(choice, Mapping) and choice.get("type") == "allowed_tools":
        tools = [{"type": "function", "function": {"name": t.get("name")}} for t in choice.get("tools") or ()]
        return {"type": "allowed_tools", "allowed_tools": {"mode": choice.get("mode", "auto"), "tools": tools}}
    raise _fail(f"'tool_choice' must be none, auto, required or name a function; found {choice!r}", "tool_choice")


def _response_format(fmt: Any) -> dict[str, Any]:
    if not isinstance(fmt, Mapping) or fmt.get("type") in (None, "text"):
        return {}
    if fmt["type"] == "json_object":
        return {"response_format": {"type": "json_object"}}
    if fmt["type"] == "json_schema":
        keys = ("name", "schema", "strict", "description")
        return {"response_format": {"type": "json_schema", "json_schema": {k: fmt[k] for k in keys if k in fmt}}}
    raise _fail(f"text.format.type must be text, json_object or json_schema; found {fmt['type']!r}", "text.format")
