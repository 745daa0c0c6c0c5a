"""Apply what the passes decided on the chat view back onto the client's own Responses body.

The passes see one chat-shaped view of a request (``responses.chat_body``). Toward an upstream
that speaks Responses itself (``ModelConfig.speaks_responses``), the gateway does not send that
view: it sends the client's body with only the gateway's edits made, each in the Responses
format, so every field it does not edit (``reasoning``, ``include``, ``store``, ``text``,
``client_metadata``, reasoning items with their ``encrypted_content``, hosted tools, fields
no one here knows yet) reaches the provider as the client sent it.

How an edit is found: the view keeps, for each chat message, the positions of the ``input``
items it was made from (``ResponsesView.positions``; a reasoning item travels with the message
after it) and, for each chat tool, where it sits in the body's ``tools``. After assembly:

- a message that is the view's own object (identity) is its items, verbatim;
- a message a pass rewrote (a stubbed tool result, a system prompt with its clock moved out) is
  its items with the changed field replaced (``output``, ``arguments``, ``content``) and every
  other field kept; it is found by its tool call ids, else as the one message of its role a pass
  replaced in the same gap between unchanged messages;
- a message the gateway wrote (a summary, the ``<reminder>``, recalled passages) is a new
  ``message`` item; items of messages the passes dropped (a compacted range) are dropped;
- ``instructions`` is the view's leading system message: a rewritten one is the new string;
- tools: the kept tools are the client's tool objects; a ``namespace`` keeps the functions kept;
  hosted tools (``web_search``, ...) are not in the view and are kept; a tool the gateway added
  is a new function tool;
- parameters a pass set (``prompt_cache_key``, ``prompt_cache_retention``, ``tool_choice``) are
  set in their Responses form.

The model id becomes the provider's (``upstream_model``), and ``previous_response_id`` is
answered by the gateway's own store as on the translated route: the upstream gets the whole
conversation as ``input`` and no ``previous_response_id``. Everything else is untouched.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from gateway.errors import RequestError
from gateway.formats.responses import chat_messages_at
from gateway.object_memo import same_objects

#: Item ids the Responses route minted for items that came without one (``input_items``):
#: the provider never saw them, so they are not sent.
_MINTED_ID = re.compile(r"^(?:msg|item)_[0-9a-f]{32}_\d+$")
#: Chat parameters a pass may set, and their name in a Responses body (``tool_choice`` is rewritten
#: in its Responses form). A chat-only parameter a pass sets (``stream_options``) has no Responses form
#: and is not sent.
_PARAMS = {
    "prompt_cache_key": "prompt_cache_key",
    "prompt_cache_retention": "prompt_cache_retention",
    "max_completion_tokens": "max_output_tokens",
    "temperature": "temperature",
    "top_p": "top_p",
    "parallel_tool_calls": "parallel_tool_calls",
    "service_tier": "service_tier",
}
INSTRUCTIONS = -1  # the position of the view's leading system message made from ``instructions``


@dataclass(frozen=True, slots=True)
class ResponsesView:
    """The client's Responses body and where each chat message and tool of its view came from."""

    body: Mapping[str, Any]  # the client's body, as parsed
    items: tuple[Mapping[str, Any], ...]  # the whole conversation's input items (a chain's earlier ones first)
    chained: bool  # ``previous_response_id`` was expanded into ``items``
    positions: tuple[tuple[int, ...], ...]  # per chat message: item positions (INSTRUCTIONS for instructions)
    tools: tuple[tuple[int, int | None], ...]  # per chat tool: (index in body tools, index in a namespace)


def view_of(body: Mapping[str, Any], items: Sequence[Mapping[str, Any]], chained: bool) -> ResponsesView:
    """Where the chat view of ``body`` over ``items`` comes from (``chat_body`` builds the same messages)."""
    _, positions = chat_messages_at(items)
    lead: list[tuple[int, ...]] = [(INSTRUCTIONS,)] if body.get("instructions") else []
    return ResponsesView(
        body=body,
        items=tuple(items),
        chained=chained,
        positions=(*lead, *(tuple(p) for p in positions)),
        tools=tuple(_tool_origins(body.get("tools") or ())),
    )


def _tool_origins(tools: Sequence[Any]) -> list[tuple[int, int | None]]:
    """Mirrors ``responses._chat_tools``: a function is one chat tool, a namespace its functions."""
    out: list[tuple[int, int | None]] = []
    for i, tool in enumerate(tools):
        if not isinstance(tool, Mapping):
            continue
        if tool.get("type") == "function":
            out.append((i, None))
        elif tool.get("type") == "namespace":
            out.extend((i, j) for j, inner in enumerate(tool.get("tools") or ()) if _is_function(inner))
    return out


def _is_function(tool: Any) -> bool:
    return isinstance(tool, Mapping) and tool.get("type") == "function"


def sendable_item(item: Mapping[str, Any]) -> Mapping[str, Any]:
    """An item of a stored conversation as the provider may receive it: without an id the gateway minted."""
    item_id = item.get("id")
    if isinstance(item_id, str) and _MINTED_ID.match(item_id):
        return {k: v for k, v in item.items() if k != "id"}
    return item


def apply_edits(
    view: ResponsesView,
    original: Sequence[Mapping[str, Any]],
    assembled: Sequence[Mapping[str, Any]],
    original_tools: Sequence[Mapping[str, Any]] | None,
    assembled_tools: Sequence[Mapping[str, Any]] | None,
    original_params: Mapping[str, Any],
    assembled_params: Mapping[str, Any],
    upstream_model: str,
) -> dict[str, Any]:
    """The Responses body the provider receives: the client's, with the passes' edits applied."""
    out = dict(view.body)
    out["model"] = upstream_model
    if view.chained:
        out.pop("previous_response_id", None)
    items, instructions = _input(view, original, assembled)
    if instructions is not None:
        out["instructions"] = instructions
    if view.chained or items is not None:
        out["input"] = items if items is not None else [sendable_item(item) for item in view.items]
    if assembled_tools is not original_tools and original_tools is not None:
        out["tools"] = _tools(view, original_tools, assembled_tools or ())
    for name, value in assembled_params.items():
        if original_params.get(name, _MISSING) is value:
            continue
        if name in _PARAMS:
            out[_PARAMS[name]] = value
        elif name == "tool_choice":
            out["tool_choice"] = responses_tool_choice(value)
    return out


_MISSING = object()


def _input(
    view: ResponsesView, original: Sequence[Mapping[str, Any]], assembled: Sequence[Mapping[str, Any]]
) -> tuple[list[Mapping[str, Any]] | None, str | None]:
    """The new ``input`` (None when every message is the view's own, in order) and new ``instructions``."""
    if same_objects(original, assembled):
        return None, None
    index = {id(m): k for k, m in enumerate(original)}
    kept = [index.get(id(m)) for m in assembled]
    matched = _correspondence(original, assembled, kept)
    items: list[Mapping[str, Any]] = []
    instructions: str | None = None
    for n, message in enumerate(assembled):
        k = kept[n] if kept[n] is not None else matched.get(n)
        if k is None:
            items.extend(_new_items(message))
            continue
        where = view.positions[k]
        if where == (INSTRUCTIONS,):
            if kept[n] is None:
                instructions = _text(message.get("content"))
            continue
        if kept[n] is not None:
            items.extend(sendable_item(view.items[p]) for p in where)
        else:
            items.extend(_rewritten(view.items[p], message) for p in where)
    return items, instructions


def _correspondence(
    original: Sequence[Mapping[str, Any]], assembled: Sequence[Mapping[str, Any]], kept: list[int | None]
) -> dict[int, int]:
    """For each rewritten message (by its index in ``assembled``), the original message it rewrites."""
    present = {k for k in kept if k is not None}
    matched: dict[int, int] = {}
    by_call: dict[str, int] = {}
    for k, m in enumerate(original):
        if k in present:
            continue
        for call_id in _call_ids(m):
            by_call.setdefault(call_id, k)
    used: set[int] = set()
    for n, m in enumerate(assembled):
        if kept[n] is not None:
            continue
        ids = _call_ids(m)
        found = next((by_call[c] for c in ids if c in by_call), None)
        if found is not None and found not in used and original[found].get("role") == m.get("role"):
            matched[n] = found
            used.add(found)
    # Messages without call ids: the one message of its role a pass replaced in the same gap.
    n = 0
    while n < len(assembled):
        if kept[n] is not None:
            n += 1
            continue
        start = n
        while n < len(assembled) and kept[n] is None:
            n += 1
        low = max((k for k in kept[:start] if k is not None), default=-1)
        high = min((k for k in kept[n:] if k is not None), default=len(original))
        gone = [k for k in range(low + 1, high) if k not in present and k not in used]
        new = [j for j in range(start, n) if j not in matched]
        if len(gone) == len(new) and all(
            original[k].get("role") == assembled[j].get("role") for k, j in zip(gone, new, strict=True)
        ):
            for k, j in zip(gone, new, strict=True):
                matched[j] = k
                used.add(k)
    return matched


def _call_ids(message: Mapping[str, Any]) -> list[str]:
    if message.get("role") == "tool":
        return [str(message.get("tool_call_id"))]
    return [str(c.get("id")) for c in message.get("tool_calls") or () if isinstance(c, Mapping)]


def _rewritten(item: Mapping[str, Any], message: Mapping[str, Any]) -> Mapping[str, Any]:
    """``item`` with what a pass changed in its chat message written back in its own field."""
    item = sendable_item(item)
    kind = item.get("type") or ("message" if "role" in item else None)
    if kind == "function_call_output":
        content = message.get("content")
        text = content if isinstance(content, str) else _text(content)
        return item if item.get("output") == text else {**item, "output": text}
    if kind == "function_call":
        call = next((c for c in message.get("tool_calls") or () if c.get("id") == item.get("call_id")), None)
        if call is None:
            return item
        arguments = (call.get("function") or {}).get("arguments")
        return item if item.get("arguments") == arguments else {**item, "arguments": arguments}
    if kind == "message":
        return {**item, "content": _content(item.get("content"), message.get("content"), item.get("role"))}
    return item


def _content(before: Any, after: Any, role: Any) -> Any:
    """``after`` (chat content) in the form of ``before`` (the item's content): parts kept where unchanged."""
    if isinstance(after, str):
        if isinstance(before, str) or not isinstance(before, list):
            return after
        return [{"type": "output_text" if role == "assistant" else "input_text", "text": after}]
    if not isinstance(after, list):
        return before
    originals = list(before) if isinstance(before, list) else []
    out: list[Any] = []
    for j, part in enumerate(after):
        old = originals[j] if j < len(originals) else None
        out.append(_part(old, part, role))
    return out


def _part(old: Any, part: Mapping[str, Any], role: Any) -> Any:
    kind = part.get("type")
    if kind == "text":
        text = part.get("text") or ""
        if isinstance(old, Mapping) and old.get("type") in ("input_text", "output_text", "text"):
            return old if old.get("text") == text else {**old, "text": text}
        return {"type": "output_text" if role == "assistant" else "input_text", "text": text}
    if isinstance(old, Mapping) and old.get("type") in ("input_image", "input_file"):
        return old
    if kind == "image_url":
        url = part.get("image_url") or {}
        return {"type": "input_image", "image_url": url.get("url"), "detail": url.get("detail") or "auto"}
    if kind == "file":
        return {"type": "input_file", **(part.get("file") or {})}
    raise RequestError(f"a chat content part of type {kind!r} has no Responses form", param="input")


def _new_items(message: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """A message the gateway wrote, as Responses input items."""
    role = message.get("role")
    if role == "tool":
        content = message.get("content")
        output = content if isinstance(content, str) else _text(content)
        return [{"type": "function_call_output", "call_id": message.get("tool_call_id"), "output": output}]
    items: list[Mapping[str, Any]] = []
    content = message.get("content")
    if content not in (None, "", []):
        items.append({"type": "message", "role": role, "content": _content(None, content, role)})
    for call in message.get("tool_calls") or ():
        fn = call.get("function") or {}
        items.append(
            {
                "type": "function_call",
                "call_id": call.get("id"),
                "name": fn.get("name"),
                "arguments": fn.get("arguments"),
            }
        )
    return items


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(str(p.get("text") or "") for p in content if isinstance(p, Mapping))
    return ""


def _tools(
    view: ResponsesView, original: Sequence[Mapping[str, Any]], assembled: Sequence[Mapping[str, Any]]
) -> list[Mapping[str, Any]]:
    """The body's tools with only the kept ones (hosted tools always), the gateway's own added."""
    index = {id(t): n for n, t in enumerate(original)}
    kept: set[tuple[int, int | None]] = set()
    added: list[Mapping[str, Any]] = []
    by_name = {str((t.get("function") or {}).get("name")): n for n, t in enumerate(original)}
    for tool in assembled:
        n = index.get(id(tool))
        if n is None:  # a rewritten client tool keeps its place; another is the gateway's own
            n = by_name.get(str((tool.get("function") or {}).get("name")))
            if n is None:
                added.append(_function_tool(tool))
                continue
        kept.add(view.tools[n])
    out: list[Mapping[str, Any]] = []
    for i, tool in enumerate(view.body.get("tools") or ()):
        if not isinstance(tool, Mapping):
            continue
        if tool.get("type") == "function":
            if (i, None) in kept:
                out.append(tool)
        elif tool.get("type") == "namespace":
            inner = list(tool.get("tools") or ())
            chosen = [t for j, t in enumerate(inner) if not _is_function(t) or (i, j) in kept]
            if any(_is_function(t) for t in chosen):
                out.append(tool if len(chosen) == len(inner) else {**tool, "tools": chosen})
        else:
            out.append(tool)  # hosted: the provider runs it; the view never had it
    return [*out, *added]


def _function_tool(tool: Mapping[str, Any]) -> dict[str, Any]:
    fn = tool.get("function") or {}
    out: dict[str, Any] = {"type": "function", "name": fn.get("name")}
    out.update({k: fn[k] for k in ("description", "parameters", "strict") if fn.get(k) is not None})
    return out


def responses_tool_choice(choice: Any) -> Any:
    """A chat ``tool_choice`` in its Responses form."""
    if isinstance(choice, str) or not isinstance(choice, Mapping):
        return choice
    if choice.get("type") == "function":
        return {"type": "function", "name": (choice.get("function") or {}).get("name")}
    if choice.get("type") == "allowed_tools":
        allowed = choice.get("allowed_tools") or {}
        tools = [
            {"type": "function", "name": (t.get("function") or {}).get("name")} for t in allowed.get("tools") or ()
        ]
        return {"type": "allowed_tools", "mode": allowed.get("mode", "auto"), "tools": tools}
    return choice
