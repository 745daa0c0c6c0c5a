"""A chat completion as a Response: the output items, usage and status the Responses API returns.

The answer side of ``formats.responses``: ids are derived from the response id (``msg_<id>``,
``fc_<id>_<n>``), so a response's items can be named again without a lookup, and an item
translated back by ``chat_messages`` gives the message the provider answered with.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def listed_item(item: Mapping[str, Any]) -> dict[str, Any]:
    """``item`` as ``input_items`` lists it: text content as parts and a status, as the API returns items.

    The stored item is kept as the client sent it, so the next turn translates to the same chat message.
    """
    out = dict(item)
    kind = item.get("type")
    if kind == "message" and isinstance(item.get("content"), str):
        part = "output_text" if item.get("role") == "assistant" else "input_text"
        text: dict[str, Any] = {"type": part, "text": item["content"]}
        if part == "output_text":
            text.update(annotations=[], logprobs=[])
        out["content"] = [text]
    if kind in ("function_call", "function_call_output") or (kind == "message" and item.get("role") == "assistant"):
        out.setdefault("status", "completed")
    return out


def response_object(
    request: Mapping[str, Any], response_id: str, created_at: int, *, status: str = "in_progress"
) -> dict[str, Any]:
    """The Response as the request describes it, before any output: what ``response.created`` carries."""
    text = request.get("text") if isinstance(request.get("text"), Mapping) else None
    return {
        "id": response_id,
        "object": "response",
        "created_at": created_at,
        "status": status,
        "completed_at": None,
        "error": None,
        "incomplete_details": None,
        "instructions": request.get("instructions"),
        "max_output_tokens": request.get("max_output_tokens"),
        "model": request["model"],
        "output": [],
        "parallel_tool_calls": request.get("parallel_tool_calls", True),
        "previous_response_id": request.get("previous_response_id"),
        "reasoning": request.get("reasoning"),
        "store": request.get("store", True),
        "temperature": request.get("temperature", 1.0),
        "text": text or {"format": {"type": "text"}},
        "tool_choice": request.get("tool_choice", "auto"),
        "tools": [_echoed_tool(t) for t in request.get("tools") or ()],
        "top_p": request.get("top_p", 1.0),
        "truncation": request.get("truncation", "disabled"),
        "metadata": dict(request.get("metadata") or {}),
        **({"user": request["user"]} if isinstance(request.get("user"), str) else {}),
    }


def _echoed_tool(tool: Any) -> Any:
    """A function tool as the Response object describes it: ``strict`` and ``parameters`` always present."""
    if isinstance(tool, Mapping) and tool.get("type") == "function":
        return {**tool, "strict": tool.get("strict"), "parameters": tool.get("parameters")}
    return tool


def finished(
    base: Mapping[str, Any], output: list[dict[str, Any]], usage: Any, finish_reason: Any, at: int
) -> dict[str, Any]:
    """``base`` with its output, usage and final status (``length`` and ``content_filter`` are incomplete)."""
    reason = {"length": "max_output_tokens", "content_filter": "content_filter"}.get(str(finish_reason))
    counted = response_usage(usage)
    return {
        **base,
        "status": "incomplete" if reason else "completed",
        "completed_at": None if reason else at,
        "incomplete_details": {"reason": reason} if reason else None,
        "output": output,
        **({"usage": counted} if counted is not None else {}),
    }


def output_items(
    message: Mapping[str, Any], response_id: str, spaces: Mapping[str, str] | None = None
) -> list[dict[str, Any]]:
    """Output items for a chat answer's message: its text as a message item, then one item per tool call
    (``spaces``: the namespace each namespaced function was offered in)."""
    items: list[dict[str, Any]] = []
    text = message.get("content")
    if (isinstance(text, str) and text) or message.get("refusal"):
        items.append(message_item(response_id, text or "", refusal=message.get("refusal")))
    for i, call in enumerate(message.get("tool_calls") or ()):
        fn = call.get("function") or {}
        name = fn.get("name") or ""
        space = (spaces or {}).get(name)
        items.append(call_item(response_id, i, call.get("id") or "", name, fn.get("arguments") or "", namespace=space))
    return items


def message_item(
    response_id: str, text: str, *, status: str = "completed", refusal: str | None = None
) -> dict[str, Any]:
    content: list[dict[str, Any]] = [{"type": "output_text", "text": text, "annotations": [], "logprobs": []}]
    if refusal and not text:
        content = [{"type": "refusal", "refusal": refusal}]
    return {
        "id": f"msg_{response_id[5:]}",
        "type": "message",
        "role": "assistant",
        "status": status,
        "content": content,
    }


def call_item(
    response_id: str,
    index: int,
    call_id: str,
    name: str,
    arguments: str,
    *,
    status: str = "completed",
    namespace: str | None = None,
) -> dict[str, Any]:
    item = {
        "id": f"fc_{response_id[5:]}_{index}",
        "type": "function_call",
        "status": status,
        "call_id": call_id,
        "name": name,
        "arguments": arguments,
    }
    if namespace:
        item["namespace"] = namespace
    return item


def namespaces(tools: Any) -> dict[str, str]:
    """Function name -> the ``namespace`` tool it was offered in, so its calls come back naming it."""
    found: dict[str, str] = {}
    for tool in tools or ():
        if isinstance(tool, Mapping) and tool.get("type") == "namespace":
            for inner in tool.get("tools") or ():
                if isinstance(inner, Mapping) and isinstance(inner.get("name"), str):
                    found[inner["name"]] = str(tool.get("name"))
    return found


def response_usage(usage: Any) -> dict[str, Any] | None:
    """Chat usage as Responses usage; the provider's ``cached_tokens`` kept as ``input_tokens_details``."""
    if not isinstance(usage, Mapping):
        return None
    prompt = usage.get("prompt_tokens_details") or {}
    completion = usage.get("completion_tokens_details") or {}
    return {
        "input_tokens": int(usage.get("prompt_tokens") or 0),
        "input_tokens_details": {
            "cached_tokens": int(prompt.get("cached_tokens") or 0),
            "cache_write_tokens": int(
                usage.get("cache_creation_input_tokens") or prompt.get("cache_write_tokens") or 0
            ),
        },
        "output_tokens": int(usage.get("completion_tokens") or 0),
        "output_tokens_details": {"reasoning_tokens": int(completion.get("reasoning_tokens") or 0)},
        "total_tokens": int(usage.get("total_tokens") or 0),
    }


def response_from_chat(chat: Mapping[str, Any], base: Mapping[str, Any], at: int) -> dict[str, Any]:
    """The finished Response for a chat completion answering the request ``base`` was made from."""
    choice = (chat.get("choices") or [{}])[0]
    output = output_items(choice.get("message") or {}, str(base["id"]), namespaces(base.get("tools")))
    return finished(base, output, chat.get("usage"), choice.get("finish_reason"), at)
