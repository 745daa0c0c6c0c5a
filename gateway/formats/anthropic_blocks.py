"""One Messages content block as a chat content part: the block-level half of the Messages translation.

``formats.anthropic_messages`` walks a request's messages; this module knows the blocks. A
block the chat shape has a part for (text, image, document) becomes that part; the blocks it
has none for become text, in the view (``native``) always and when crossing only where the
text keeps the block's meaning (``search_result``, ``tool_reference``). The rest (server tool
calls and their results, blocks this gateway does not know) cannot cross to a chat upstream:
``cannot_cross`` names them in the 400.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import orjson

from gateway.errors import RequestError

#: Blocks whose text form keeps their meaning for a chat model.
_TEXT_FORMS = frozenset({"text", "search_result", "tool_reference"})


def fail(message: str, param: str) -> RequestError:
    return RequestError(message, param=param, code="invalid_value")


def cannot_cross(kind: str, where: str) -> RequestError:
    return fail(
        f"{where} is a {kind!r} block, which cannot be sent to a model that does not speak Anthropic's "
        "Messages API without changing the request's meaning; send it to an anthropic/ model",
        where,
    )


def text_part(block: Mapping[str, Any]) -> dict[str, Any]:
    part: dict[str, Any] = {"type": "text", "text": block["text"]}
    if block.get("cache_control") is not None:
        part["cache_control"] = block["cache_control"]
    return part


def block_text(block: Mapping[str, Any], where: str, native: bool) -> str:
    """The text a block stands for in a chat body (citations are not kept: chat text has no place for them)."""
    kind = str(block.get("type"))
    if kind == "text":
        return str(block.get("text", ""))
    if kind == "tool_reference":
        return f"[tool loaded: {block.get('tool_name', '')}]"
    if kind == "search_result":
        inner = block.get("content")
        body = (
            "\n".join(str(b.get("text", "")) for b in inner if isinstance(b, Mapping))
            if isinstance(inner, list)
            else ""
        )
        return f"[search result: {block.get('title', '')} ({block.get('source', '')})]\n{body}"
    if not native:
        raise cannot_cross(kind, where)
    rest = {k: v for k, v in block.items() if k not in ("type", "cache_control")}
    return f"[{kind}] {orjson.dumps(rest).decode()}"


def other_part(block: Mapping[str, Any], where: str, native: bool) -> dict[str, Any]:
    """A block with no chat part of its own as a text part (``cache_control`` kept)."""
    return text_part({"text": block_text(block, where, native), "cache_control": block.get("cache_control")})


def tool_result_text(content: Any, where: str, native: bool) -> str:
    """A ``tool_result``'s content as the text of a chat ``tool`` message."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        raise fail(f"{where}.content must be a string or an array of blocks", f"{where}.content")
    pieces = []
    for k, item in enumerate(content):
        kind = item.get("type") if isinstance(item, Mapping) else None
        if kind == "image":
            pieces.append("[image]")
        elif kind == "document" and isinstance(item, Mapping):
            pieces.append(str(document(item, f"{where}.content[{k}]").get("text", "[document]")))
        elif isinstance(item, Mapping) and isinstance(kind, str):
            pieces.append(block_text(item, f"{where}.content[{k}]", native or kind in _TEXT_FORMS))
    return "\n".join(p for p in pieces if p)


def image(block: Mapping[str, Any], where: str) -> dict[str, Any]:
    source = block.get("source")
    if isinstance(source, Mapping) and source.get("type") == "base64":
        url = f"data:{source.get('media_type', 'image/png')};base64,{source.get('data', '')}"
    elif isinstance(source, Mapping) and source.get("type") == "url" and isinstance(source.get("url"), str):
        url = source["url"]
    else:
        raise fail(f"{where}.source must be a base64 or url image source", f"{where}.source")
    part: dict[str, Any] = {"type": "image_url", "image_url": {"url": url}}
    if block.get("cache_control") is not None:
        part["cache_control"] = block["cache_control"]
    return part


def document(block: Mapping[str, Any], where: str) -> dict[str, Any]:
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
    elif kind == "file" and isinstance(source.get("file_id"), str):
        part = {"type": "text", "text": f"[document: {title + ' ' if title else ''}file {source['file_id']}]"}
    else:
        raise fail(f"{where}.source must be a base64, text, content, url or file document source", f"{where}.source")
    if block.get("cache_control") is not None:
        part["cache_control"] = block["cache_control"]
    return part
