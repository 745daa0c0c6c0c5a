"""Relay a provider's stream to the client chunk by chunk while reassembling it for the log.

The gateway always asks the provider for usage (to record cached tokens); the client
receives the usage chunk only if it asked for it. Chunks are forwarded as received,
except that usage is normalised (``prompt_tokens_details.cached_tokens``).

What the record needs from the chunks' choices (the text, tool calls, finish reason) is gathered
after they are relayed, not before: ``feed`` keeps each chunk's choices, and ``absorb`` reads them
once the batch they came in has been sent (the relay calls it before the next batch) or when the
answer is asked for. A stream that arrives whole (a fast provider, or a gateway the scheduler held
while the provider wrote) has its first byte out before any of that work; memory holds at most one
batch of choices.
"""

from __future__ import annotations

from typing import Any

import orjson

from gateway.errors import UpstreamUnavailable
from gateway.store.record import Answer
from gateway.upstream.usage import Usage, normalise_usage

#: How a chunk ends when the provider sends ``"usage": null`` last, as OpenAI and the simulator do.
_NULL_USAGE = b',"usage":null}'


class StreamRelay:
    def __init__(self, *, model_name: str, forward_usage: bool) -> None:
        self.model_name = model_name
        self.forward_usage = forward_usage
        self.text: list[str] = []
        self.tool_calls: dict[int, dict[str, Any]] = {}
        self.finish_reason: str | None = None
        self.usage = Usage()
        self.chunks = 0
        self._unread: list[list[Any]] = []  # the choices of chunks relayed and not yet absorbed

    def feed(self, payload: bytes) -> bytes | None:
        """Take one SSE data payload; return the bytes to send the client, or None to drop it."""
        self.chunks += 1
        try:
            chunk = orjson.loads(payload)
        except orjson.JSONDecodeError as exc:
            # Forwarding it would crash the client's SDK mid-stream; end with an error event instead.
            raise UpstreamUnavailable(f"upstream sent a stream chunk that is not JSON: {payload[:80]!r}") from exc
        if not isinstance(chunk, dict):
            return b"data: " + payload + b"\n\n"
        choices = chunk.get("choices")
        if choices and isinstance(choices, list):
            self._unread.append(choices)
        usage = chunk.get("usage")
        if usage:
            block, self.usage = normalise_usage(usage, chunk.get("timings"))
            if not self.forward_usage:
                if not chunk.get("choices"):
                    return None
                chunk = {k: v for k, v in chunk.items() if k != "usage"}
            else:
                chunk = {**chunk, "usage": block}
            return b"data: " + orjson.dumps(chunk) + b"\n\n"
        if "usage" in chunk and not self.forward_usage:
            if payload.endswith(_NULL_USAGE):  # the usual place: cut the bytes, skip a re-encode
                return b"data: " + payload[: -len(_NULL_USAGE)] + b"}\n\n"
            chunk = {k: v for k, v in chunk.items() if k != "usage"}
            return b"data: " + orjson.dumps(chunk) + b"\n\n"
        return b"data: " + payload + b"\n\n"

    def absorb(self) -> None:
        """Read the choices of the chunks fed so far into the text, tool calls and finish reason."""
        unread, self._unread = self._unread, []
        for choices in unread:
            for choice in choices:
                if isinstance(choice, dict):
                    self._absorb(choice)

    def _absorb(self, choice: dict[str, Any]) -> None:
        if choice.get("index", 0) != 0:
            return
        delta = choice.get("delta") or {}
        if isinstance(delta.get("content"), str):
            self.text.append(delta["content"])
        for call in delta.get("tool_calls") or ():
            slot = self.tool_calls.setdefault(
                int(call.get("index", 0)), {"id": None, "type": "function", "function": {"name": "", "arguments": ""}}
            )
            if call.get("id"):
                slot["id"] = call["id"]
            fn = call.get("function") or {}
            slot["function"]["name"] += fn.get("name") or ""
            slot["function"]["arguments"] += fn.get("arguments") or ""
        if choice.get("finish_reason"):
            self.finish_reason = choice["finish_reason"]

    def answer(self) -> Answer:
        """What was reassembled so far: text, tool calls, finish reason, usage (no body: it was a stream)."""
        self.absorb()
        calls = [self.tool_calls[i] for i in sorted(self.tool_calls)] or None
        return Answer(None, "".join(self.text), self.finish_reason, calls, self.usage)
