"""Read a Messages answer (JSON or event stream) for the record, without changing a byte the client gets.

A natively forwarded request is answered with the upstream's own bytes; the record still needs
its text, tool calls, stop reason and usage in the gateway's terms (chat's: ``prompt_tokens``
counts the cached and written tokens too, as Anthropic's ``input_tokens`` does not).
``MessageTally`` follows the SSE events as they pass and rebuilds the message they carry.
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping
from typing import Any

import orjson

#: Anthropic stop reasons in chat's words (the store and metrics speak chat's).
FINISH_REASONS: Mapping[str, str] = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "max_tokens": "length",
    "tool_use": "tool_calls",
    "refusal": "content_filter",
}


def _int(value: Any) -> int:
    return int(value) if isinstance(value, int | float) and not isinstance(value, bool) else 0


def chat_usage(usage: Any) -> dict[str, Any]:
    """Anthropic usage as a chat usage block: the prompt is input plus cache reads plus cache writes."""
    usage = usage if isinstance(usage, Mapping) else {}
    read, write = _int(usage.get("cache_read_input_tokens")), _int(usage.get("cache_creation_input_tokens"))
    prompt = _int(usage.get("input_tokens")) + read + write
    return {
        "prompt_tokens": prompt,
        "completion_tokens": _int(usage.get("output_tokens")),
        "total_tokens": prompt + _int(usage.get("output_tokens")),
        "prompt_tokens_details": {"cached_tokens": read},
        "cache_read_input_tokens": read,
        "cache_creation_input_tokens": write,
    }


def recorded_parts(message: Mapping[str, Any]) -> tuple[str | None, str | None, list[dict[str, Any]] | None]:
    """The answer's text, finish reason (chat's words) and tool calls (chat's shape), for the record."""
    texts: list[str] = []
    calls: list[dict[str, Any]] = []
    for block in message.get("content") or ():
        if not isinstance(block, Mapping):
            continue
        if block.get("type") == "text":
            texts.append(str(block.get("text", "")))
        elif block.get("type") == "tool_use":
            arguments = orjson.dumps(block.get("input") or {}).decode()
            calls.append(
                {
                    "id": block.get("id"),
                    "type": "function",
                    "function": {"name": block.get("name"), "arguments": arguments},
                }
            )
    reason = message.get("stop_reason")
    finish = FINISH_REASONS.get(str(reason), str(reason)) if reason is not None else None
    return ("".join(texts) if texts else None), finish, (calls or None)


class MessageTally:
    """Follows a Messages event stream (raw SSE bytes, any chunking) and rebuilds its message."""

    def __init__(self) -> None:
        self._pending = b""
        self.message: dict[str, Any] = {"content": [], "usage": {}}
        self._json: dict[int, str] = {}
        self.error: Mapping[str, Any] | None = None
        self.stopped = False  # the ``message_stop`` event seen: the client has its whole answer once it gets it

    def feed(self, data: bytes) -> None:
        *lines, self._pending = (self._pending + data).split(b"\n")
        for raw in lines:
            line = raw.strip()
            if line.startswith(b"data:"):
                try:
                    event = orjson.loads(line[5:])
                except orjson.JSONDecodeError:
                    continue
                if isinstance(event, dict):
                    self._event(event)

    def _event(self, event: dict[str, Any]) -> None:
        kind = event.get("type")
        if kind == "message_start" and isinstance(event.get("message"), Mapping):
            start = dict(event["message"])
            self.message = {
                **start,
                "content": list(start.get("content") or []),
                "usage": dict(start.get("usage") or {}),
            }
        elif kind == "content_block_start" and isinstance(event.get("content_block"), Mapping):
            self.message["content"].append(dict(event["content_block"]))
        elif kind == "content_block_delta" and isinstance(event.get("delta"), Mapping):
            self._delta(_int(event.get("index")), event["delta"])
        elif kind == "content_block_stop":
            index = _int(event.get("index"))
            if index in self._json and index < len(self.message["content"]):
                with contextlib.suppress(orjson.JSONDecodeError):  # a cut-off input stays as it started
                    self.message["content"][index]["input"] = orjson.loads(self._json.pop(index) or "{}")
        elif kind == "message_delta":
            found = event.get("delta")
            delta: Mapping[str, Any] = found if isinstance(found, Mapping) else {}
            self.message.update({k: v for k, v in delta.items() if k in ("stop_reason", "stop_sequence")})
            usage = event.get("usage")
            if isinstance(usage, Mapping):
                self.message["usage"].update({k: v for k, v in usage.items() if v is not None})
        elif kind == "message_stop":
            self.stopped = True
        elif kind == "error":
            self.error = event.get("error") if isinstance(event.get("error"), Mapping) else {"message": str(event)}

    def _delta(self, index: int, delta: Mapping[str, Any]) -> None:
        if index >= len(self.message["content"]):
            return
        block = self.message["content"][index]
        kind = delta.get("type")
        if kind == "text_delta":
            block["text"] = str(block.get("text", "")) + str(delta.get("text", ""))
        elif kind == "input_json_delta":
            self._json[index] = self._json.get(index, "") + str(delta.get("partial_json", ""))
        elif kind == "thinking_delta":
            block["thinking"] = str(block.get("thinking", "")) + str(delta.get("thinking", ""))
