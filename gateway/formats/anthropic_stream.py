"""Turn a stream of chat-completion chunks into the Messages event stream.

Anthropic streams a message as ``message_start``, ``ping``, then for each content block
``content_block_start``, its ``content_block_delta`` events (``text_delta``,
``input_json_delta``, ``thinking_delta``, ``signature_delta``) and ``content_block_stop``,
then ``message_delta`` (stop reason and usage) and ``message_stop``; a failure mid-stream
is an ``error`` event. Chat chunks interleave nothing, so each new kind of delta (text,
reasoning, a new tool call index) closes the open block and opens the next.

Usage is known only at the end of a chat stream (``stream_options.include_usage``), so
``message_start`` reports zero and ``message_delta`` carries the whole usage, input and
cache fields included, as the Messages API allows.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

import orjson

from gateway.formats.anthropic_messages import STOP_REASONS, error_body, message_id, usage_of


def sse(event: Mapping[str, Any]) -> bytes:
    return b"event: " + str(event["type"]).encode() + b"\ndata: " + orjson.dumps(event) + b"\n\n"


def chat_payloads(buffer: bytearray, data: bytes) -> Iterator[bytes]:
    """The ``data:`` payloads completed by appending ``data`` to ``buffer`` (which keeps the rest)."""
    buffer += data
    while (end := buffer.find(b"\n\n")) >= 0:
        event = bytes(buffer[:end])
        del buffer[: end + 2]
        for line in event.split(b"\n"):
            if line.startswith(b"data:"):
                yield line[5:].strip()


class MessagesStream:
    """Stateful translator: feed chat chunks, get Messages events (already SSE-encoded)."""

    def __init__(self, model: str, applied_edits: list[dict[str, Any]] | None = None) -> None:
        self.model = model
        #: the context edits the gateway made for this request; reported on ``message_delta`` as Anthropic does
        self.applied_edits = applied_edits
        self.started = False
        self.index = -1
        self.open: tuple[str, object] | None = None  # (kind, key) of the open content block
        self.stop_reason: str | None = None
        self.usage: Any = None
        self.tool_id: str | None = None

    def _start(self, chat_id: Any) -> list[bytes]:
        if self.started:
            return []
        self.started = True
        message: dict[str, Any] = {
            "id": message_id(chat_id),
            "type": "message",
            "role": "assistant",
            "model": self.model,
            "content": [],
            "stop_reason": None,
            "stop_sequence": None,
            "usage": {"input_tokens": 0, "output_tokens": 0},
        }
        return [sse({"type": "message_start", "message": message}), sse({"type": "ping"})]

    def _close(self) -> list[bytes]:
        if self.open is None:
            return []
        self.open = None
        return [sse({"type": "content_block_stop", "index": self.index})]

    def _block(self, kind: str, key: object, block: dict[str, Any]) -> list[bytes]:
        """Open a block unless the one of this kind and key is open already."""
        if self.open == (kind, key):
            return []
        out = self._close()
        self.index += 1
        self.open = (kind, key)
        out.append(sse({"type": "content_block_start", "index": self.index, "content_block": block}))
        return out

    def _delta(self, delta: dict[str, Any]) -> bytes:
        return sse({"type": "content_block_delta", "index": self.index, "delta": delta})

    def feed(self, chunk: Mapping[str, Any]) -> list[bytes]:
        out = self._start(chunk.get("id"))
        if chunk.get("usage"):
            self.usage = chunk["usage"]
        for choice in chunk.get("choices") or ():
            delta = choice.get("delta") or {}
            out += self._thinking(delta)
            text = delta.get("content")
            if isinstance(text, str) and text:
                out += self._block("text", None, {"type": "text", "text": ""})
                out.append(self._delta({"type": "text_delta", "text": text}))
            for call in delta.get("tool_calls") or ():
                out += self._tool_call(call)
            if choice.get("finish_reason"):
                self.stop_reason = STOP_REASONS.get(choice["finish_reason"], "end_turn")
        return out

    def _thinking(self, delta: Mapping[str, Any]) -> list[bytes]:
        out: list[bytes] = []
        reasoning = delta.get("reasoning_content")
        if isinstance(reasoning, str) and reasoning:
            out += self._block("thinking", None, {"type": "thinking", "thinking": "", "signature": ""})
            out.append(self._delta({"type": "thinking_delta", "thinking": reasoning}))
        for block in delta.get("thinking_blocks") or ():
            if not isinstance(block, Mapping):
                continue
            if block.get("type") == "redacted_thinking":
                out += self._block("redacted", id(block), {"type": "redacted_thinking", "data": block.get("data", "")})
            elif block.get("signature"):
                out += self._block("thinking", None, {"type": "thinking", "thinking": "", "signature": ""})
                out.append(self._delta({"type": "signature_delta", "signature": block["signature"]}))
        return out

    def _tool_call(self, call: Mapping[str, Any]) -> list[bytes]:
        fn = call.get("function") or {}
        index, call_id = call.get("index", 0), call.get("id")
        out: list[bytes] = []
        if self.open != ("tool", index) or (call_id and call_id != self.tool_id):
            out += self._close()  # some providers repeat the id on every fragment: only a new id is a new call
            self.tool_id = call_id or f"toolu_{index}"
            block: dict[str, Any] = {"type": "tool_use", "id": self.tool_id, "name": fn.get("name"), "input": {}}
            out += self._block("tool", index, block)
        arguments = fn.get("arguments")
        if isinstance(arguments, str) and arguments:
            out.append(self._delta({"type": "input_json_delta", "partial_json": arguments}))
        return out

    def finish(self) -> list[bytes]:
        """The closing events, after the chat stream's last chunk."""
        out = self._start(None) + self._close()
        delta = {"stop_reason": self.stop_reason or "end_turn", "stop_sequence": None}
        closing: dict[str, Any] = {"type": "message_delta", "delta": delta, "usage": usage_of(self.usage)}
        if self.applied_edits is not None:
            closing["context_management"] = {"applied_edits": self.applied_edits}
        out.append(sse(closing))
        out.append(sse({"type": "message_stop"}))
        return out

    def error(self, status: int, message: str) -> bytes:
        return sse(error_body(status, message))
