"""Put what the assembly passes decided back onto the client's own Messages body.

Toward an upstream that speaks Messages, the passes work on a chat-shaped view of the request
(``anthropic_messages.chat_body(..., native=True)``), whose messages and tools carry ``ORIGIN``:
where in the client's body each came from. This module reads the assembled view against the
view as built and writes the result in the Messages format:

- a client message whose view pieces all came through equal is the client's item, verbatim;
- a piece a pass changed is written back onto its own block (a stubbed tool result is the
  client's ``tool_result`` with new ``content``; a breakpoint is ``cache_control`` added to the
  block it marks; an edited text is the block with new ``text``), every other block verbatim;
- a piece a pass removed (compaction) is left out; a message the gateway wrote (a summary, the
  reminder, recalled passages) is rendered as a Messages item at its place; system text the
  gateway wrote before the conversation joins the top-level ``system``;
- kept tools are the client's tool dicts; server tools (which the view does not hold) are kept;
- every other field of the body (``thinking``, ``context_management``, ``output_config``,
  ``metadata``, fields this gateway does not know) is the client's, untouched.

Pure: the client's body is never mutated; an unchanged request returns the client's object.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from gateway.formats.anthropic_messages import ORIGIN, tool_input
from gateway.object_memo import same_objects

Json = dict[str, Any]
_THINKING = ("thinking", "redacted_thinking")
_SYSTEM_ROLES = ("system", "developer")


def _origin(message: Mapping[str, Any]) -> tuple[int, ...] | None:
    found = message.get(ORIGIN)
    return tuple(found) if isinstance(found, list) else None


def messages_body(
    original: Mapping[str, Any],
    view: Mapping[str, Any],
    messages: Sequence[Mapping[str, Any]],
    tools: Sequence[Mapping[str, Any]] | None,
    upstream_model: str,
) -> Mapping[str, Any]:
    """The Messages body the upstream gets: ``original`` with the assembled view's changes applied.

    ``view`` is the view as built from ``original`` (what the passes started from); ``messages`` and
    ``tools`` what they returned. Returns ``original`` itself when nothing changed.
    """
    before = {key: m for m in view["messages"] if (key := _origin(m)) is not None}
    leading = 0
    while leading < len(messages) and _leading_system(messages[leading]):
        leading += 1
    system = _system(original, messages[:leading], before)
    items = _items(original, messages[leading:], before)
    new_tools = _tools(original.get("tools"), view.get("tools"), tools)
    unchanged = (
        system is original.get("system")
        and same_objects(items, original["messages"])
        and new_tools is original.get("tools")
        and original.get("model") == upstream_model
    )
    if unchanged:
        return original
    out = dict(original)
    out["model"] = upstream_model
    out["messages"] = items
    if system is None:
        out.pop("system", None)
    else:
        out["system"] = system
    if new_tools is None:
        out.pop("tools", None)
    else:
        out["tools"] = new_tools
    return out


def _leading_system(message: Mapping[str, Any]) -> bool:
    origin = _origin(message)
    return origin == (-1, -1) or (origin is None and message.get("role") in _SYSTEM_ROLES)


def _system(
    original: Mapping[str, Any], pieces: Sequence[Mapping[str, Any]], before: Mapping[tuple[int, ...], Any]
) -> Any:
    """The top-level ``system``: the client's when its view came through alone and equal."""
    client = original.get("system")
    own = before.get((-1, -1))
    if len(pieces) == (1 if own is not None else 0) and all(p == own for p in pieces):
        return client
    blocks: list[Json] = []
    for piece in pieces:
        if _origin(piece) == (-1, -1) and own is not None:
            blocks.extend(_blocks_of(piece, own, _as_blocks(client)))
        else:
            blocks.extend(_render_parts(piece.get("content")))
    return blocks or None


def _as_blocks(content: Any) -> list[Any]:
    if isinstance(content, str):
        return [{"type": "text", "text": content}] if content else []
    return list(content) if isinstance(content, list) else []


def _parts(content: Any) -> list[Any]:
    """A chat message's content as its list of parts (a string is one text part)."""
    if isinstance(content, str):
        return [{"type": "text", "text": content}] if content else []
    return list(content) if isinstance(content, list) else []


def _blocks_of(piece: Mapping[str, Any], was: Mapping[str, Any], blocks: Sequence[Any]) -> list[Any]:
    """The client's ``blocks`` as the view piece now reads: each part written back onto its block."""
    parts, parts_before = _parts(piece.get("content")), _parts(was.get("content"))
    if len(parts) != len(parts_before) or len(parts_before) != len(blocks):
        return _render_parts(piece.get("content"))  # a pass rewrote the piece whole: render what it wrote
    return [b if p == p0 else _edited(b, p, p0) for p, p0, b in zip(parts, parts_before, blocks, strict=True)]


def _edited(block: Mapping[str, Any], part: Mapping[str, Any], was: Mapping[str, Any]) -> Json:
    """``block`` carrying what changed between the view's part ``was`` and ``part``."""
    if _without_marker(part) == _without_marker(was):  # only a breakpoint was added or removed
        return _marked(dict(block), part)
    if part.get("type") == "text" and block.get("type") == "text":
        out = {k: v for k, v in block.items() if k != "citations"}  # citations point into the old text
        out["text"] = part.get("text", "")
        return _marked(out, part)
    return _render_part(part)


def _without_marker(part: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in part.items() if k != "cache_control"}


def _marked(block: Json, like: Mapping[str, Any]) -> Json:
    if like.get("cache_control") is not None:
        block["cache_control"] = like["cache_control"]
    else:
        block.pop("cache_control", None)
    return block


def _items(
    original: Mapping[str, Any], pieces: Sequence[Mapping[str, Any]], before: Mapping[tuple[int, ...], Any]
) -> list[Any]:
    """The ``messages`` array: client items (verbatim or edited) and the gateway's own, in the view's order."""
    client: list[Any] = original["messages"]
    system_messages = any(isinstance(m, Mapping) and m.get("role") == "system" for m in client)
    out: list[Any] = []
    k = 0
    while k < len(pieces):
        origin = _origin(pieces[k])
        if origin is not None and origin[0] >= 0:
            group = [pieces[k]]
            k += 1
            while k < len(pieces) and (o := _origin(pieces[k])) is not None and o[0] == origin[0]:
                group.append(pieces[k])
                k += 1
            item = _item(client[origin[0]], origin[0], group, before)
            if item is not None:
                out.append(item)
            continue
        if pieces[k].get("role") == "tool":
            results = []
            while k < len(pieces) and pieces[k].get("role") == "tool" and _origin(pieces[k]) is None:
                results.append(_render_result(pieces[k]))
                k += 1
            out.append({"role": "user", "content": results})
            continue
        out.append(_render_message(pieces[k], system_messages))
        k += 1
    return out


def _item(message: Any, i: int, group: list[Mapping[str, Any]], before: Mapping[tuple[int, ...], Any]) -> Any:
    """Client item ``i`` as its view pieces ``group`` now read; None when none of it is left."""
    was = [v for key, v in before.items() if key[0] == i]
    if len(group) == len(was) and all(g == w for g, w in zip(group, was, strict=True)):
        return message
    role, content = message["role"], message["content"]
    present = {_origin(g): g for g in group}
    if role == "assistant":
        return _assistant(message, group[0], before[(i, -1)])
    blocks = _as_blocks(content)
    rest_index = [j for j, b in enumerate(blocks) if not (role == "user" and b.get("type") == "tool_result")]
    rest = present.get((i, -1))
    rendered = _blocks_of(rest, before[(i, -1)], [blocks[j] for j in rest_index]) if rest is not None else []
    aligned = len(rendered) == len(rest_index)
    out: list[Any] = []
    for j, block in enumerate(blocks):
        if j not in rest_index:
            piece = present.get((i, j))
            if piece is not None:
                out.append(block if piece == before[(i, j)] else _edited_result(block, piece, before[(i, j)]))
        elif aligned and rest is not None:
            out.append(rendered[rest_index.index(j)])
    if not aligned:
        out.extend(rendered)
    if not out:
        return None
    if isinstance(content, str) and len(out) == 1 and set(out[0]) == {"type", "text"}:
        return {**message, "content": out[0]["text"]}
    return {**message, "content": out}


def _edited_result(block: Mapping[str, Any], piece: Mapping[str, Any], was: Mapping[str, Any]) -> Json:
    """A ``tool_result`` whose view message a pass changed (stubbed, marked): the client's block, edited."""
    out = dict(block)
    if piece.get("content") != was.get("content"):
        text = str(piece.get("content") or "")
        out["content"] = text.removeprefix("[error] ") if block.get("is_error") else text
    if piece.get("cache_control") != was.get("cache_control"):
        _marked(out, piece)
    return out


def _assistant(message: Mapping[str, Any], piece: Mapping[str, Any], was: Mapping[str, Any]) -> Any:
    """An assistant item with each changed text, call or thinking block written back in place."""
    blocks = _as_blocks(message["content"])
    parts, parts_before = _parts(piece.get("content")), _parts(was.get("content"))
    calls, calls_before = list(piece.get("tool_calls") or ()), list(was.get("tool_calls") or ())
    thinking, thinking_before = list(piece.get("thinking_blocks") or ()), list(was.get("thinking_blocks") or ())
    texts = [b for b in blocks if b.get("type") not in ("tool_use", *_THINKING)]
    if (len(parts), len(calls), len(thinking)) != (len(parts_before), len(calls_before), len(thinking_before)) or len(
        texts
    ) != len(parts_before):
        return _render_message(piece, False)
    out: list[Any] = []
    p = c = t = 0
    for block in blocks:
        kind = block.get("type")
        if kind == "tool_use":
            call = calls[c]
            out.append(
                block if call == calls_before[c] else {**block, "input": tool_input(call["function"]["arguments"])}
            )
            c += 1
        elif kind in _THINKING:
            out.append(block if thinking[t] == thinking_before[t] else thinking[t])
            t += 1
        else:
            out.append(block if parts[p] == parts_before[p] else _edited(block, parts[p], parts_before[p]))
            p += 1
    return {**message, "content": out}


def _render_part(part: Any) -> Json:
    """A chat content part the gateway wrote, as a Messages block."""
    if not isinstance(part, Mapping):
        return {"type": "text", "text": str(part)}
    kind = part.get("type")
    block: Json
    if kind == "image_url":
        url = str((part.get("image_url") or {}).get("url", ""))
        if url.startswith("data:") and ";base64," in url:
            media, data = url[5:].split(";base64,", 1)
            block = {"type": "image", "source": {"type": "base64", "media_type": media, "data": data}}
        else:
            block = {"type": "image", "source": {"type": "url", "url": url}}
    elif kind == "file":
        data = str((part.get("file") or {}).get("file_data", ""))
        media, _, payload = data[5:].partition(";base64,")
        block = {"type": "document", "source": {"type": "base64", "media_type": media, "data": payload}}
    else:
        block = {"type": "text", "text": str(part.get("text", ""))}
    return _marked(block, part)


def _render_parts(content: Any) -> list[Json]:
    return [_render_part(p) for p in _parts(content)]


def _render_result(message: Mapping[str, Any]) -> Json:
    out: Json = {"type": "tool_result", "tool_use_id": message.get("tool_call_id"), "content": message.get("content")}
    return _marked(out, message)


def _render_message(message: Mapping[str, Any], system_messages: bool) -> Json:
    """A message the gateway wrote (or rewrote whole) as a Messages item.

    A system message inside the conversation stays one only where the client sends such messages
    itself (it then sends the beta that allows them); elsewhere it is a user turn."""
    role = str(message.get("role"))
    content = message.get("content")
    if role in _SYSTEM_ROLES:
        role = "system" if system_messages else "user"
    if role != "assistant":
        return {"role": role, "content": content if isinstance(content, str) else _render_parts(content)}
    blocks: list[Json] = [dict(b) for b in message.get("thinking_blocks") or ()]
    blocks.extend(_render_parts(content))
    for call in message.get("tool_calls") or ():
        fn = call.get("function") or {}
        blocks.append(
            {"type": "tool_use", "id": call.get("id"), "name": fn.get("name"), "input": tool_input(fn.get("arguments"))}
        )
    return {"role": "assistant", "content": blocks}


def _tools(client: Any, view: Any, assembled: Sequence[Mapping[str, Any]] | None) -> Any:
    """The ``tools`` array: the client's own list when the view's came through equal; else the kept ones
    (the client's dicts, with any breakpoint or ``defer_loading`` the gateway set), its server tools, and
    any tool the gateway added."""
    if not isinstance(client, list):
        return client if not assembled else [_render_tool(t) for t in assembled]
    was = list(view or ())
    if list(assembled or ()) == was:
        return client
    by_origin = {tuple(t[ORIGIN]): t for t in was if isinstance(t.get(ORIGIN), list)}
    names = {t.get("name") for t in client if isinstance(t, Mapping)}
    out: list[Any] = []
    for tool in assembled or ():
        origin = _origin(tool)
        if origin is not None:
            mine, seen = client[origin[0]], by_origin.get(origin)
            out.append(mine if tool == seen else _edited_tool(mine, tool, seen or {}))
        elif tool.get("type") == "function":
            out.append(_render_tool(tool))
        elif tool.get("name") not in names:  # a server tool the gateway added (Anthropic's tool search)
            out.append(dict(tool))
    out.extend(t for t in client if isinstance(t, Mapping) and t.get("type") not in (None, "custom"))
    return out


def _edited_tool(client: Mapping[str, Any], tool: Mapping[str, Any], was: Mapping[str, Any]) -> Json:
    """The client's tool with the breakpoint or ``defer_loading`` the gateway set. Nothing else of a
    definition is ever edited: a tool is static (a pass that rewrote its description would break the
    prefix cache and change what the model is told the tool does)."""
    out = dict(client)
    for key in ("cache_control", "defer_loading"):
        if tool.get(key) != was.get(key):
            if tool.get(key) is None:
                out.pop(key, None)
            else:
                out[key] = tool[key]
    return out


def _render_tool(tool: Mapping[str, Any]) -> Json:
    fn = tool.get("function") or {}
    out: Json = {"name": fn.get("name"), "input_schema": fn.get("parameters") or {"type": "object"}}
    if fn.get("description") is not None:
        out["description"] = fn["description"]
    for key in ("cache_control", "defer_loading"):
        if tool.get(key) is not None:
            out[key] = tool[key]
    return out
