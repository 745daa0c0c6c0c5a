"""A stream of chat-completion chunks as the Responses event sequence.

Chat streams text deltas and tool-call deltas under one choice; Responses streams
output items, each opened (``output_item.added``), filled by deltas and closed
(``output_item.done``), inside ``response.created`` ... ``response.completed``. One
``ResponseEvents`` per stream holds what is open; each chunk becomes the events it
implies at once, so the client sees text as the provider sends it, not at the end.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from gateway.formats.responses_answer import call_item, finished, message_item, namespaces


class ResponseEvents:
    """Turn one chat chunk stream into Responses events; ``base`` is the in-progress Response.

    Contract: ``start`` first, then ``chunk`` per chat chunk, then exactly one of
    ``complete`` or ``fail``. Events are dicts numbered by ``sequence_number`` from 0.
    """

    def __init__(self, base: Mapping[str, Any]) -> None:
        self.base = dict(base)
        self.response_id = str(base["id"])
        self.sequence = 0
        self.output: list[dict[str, Any]] = []
        self.text: list[str] | None = None  # the open message item's text, while one is open
        self.calls: dict[int, int] = {}  # chat tool-call index -> output index of its item
        self.usage: Any = None
        self.spaces = namespaces(base.get("tools"))
        self.finish_reason: Any = None

    def _event(self, kind: str, **fields: Any) -> dict[str, Any]:
        event = {"type": kind, "sequence_number": self.sequence, **fields}
        self.sequence += 1
        return event

    def start(self) -> list[dict[str, Any]]:
        return [
            self._event("response.created", response=self.base),
            self._event("response.in_progress", response=self.base),
        ]

    def chunk(self, chunk: Mapping[str, Any]) -> list[dict[str, Any]]:
        if chunk.get("usage"):
            self.usage = chunk["usage"]
        choice = (chunk.get("choices") or [None])[0]
        if not isinstance(choice, Mapping):
            return []
        self.finish_reason = choice.get("finish_reason") or self.finish_reason
        delta = choice.get("delta") or {}
        events: list[dict[str, Any]] = []
        text = delta.get("content") or delta.get("refusal")
        if text:
            events += self._text(text)
        for call in delta.get("tool_calls") or ():
            events += self._call(call)
        return events

    def _text(self, text: str) -> list[dict[str, Any]]:
        events: list[dict[str, Any]] = []
        if self.text is None:
            events += self._close_message()
            self.text = []
            item = message_item(self.response_id, "", status="in_progress")
            item["content"] = []
            self.output.append(item)
            where = {"item_id": item["id"], "output_index": len(self.output) - 1}
            events.append(self._event("response.output_item.added", output_index=where["output_index"], item=item))
            part = {"type": "output_text", "text": "", "annotations": [], "logprobs": []}
            events.append(self._event("response.content_part.added", **where, content_index=0, part=part))
        self.text.append(text)
        where = {"item_id": self.output[-1]["id"], "output_index": len(self.output) - 1}
        events.append(self._event("response.output_text.delta", **where, content_index=0, delta=text, logprobs=[]))
        return events

    def _call(self, call: Mapping[str, Any]) -> list[dict[str, Any]]:
        events: list[dict[str, Any]] = []
        index = int(call.get("index") or 0)
        fn = call.get("function") or {}
        if index not in self.calls:
            events += self._close_message()
            name = fn.get("name") or ""
            item = call_item(
                self.response_id,
                index,
                call.get("id") or "",
                name,
                "",
                status="in_progress",
                namespace=self.spaces.get(name),
            )
            self.output.append(item)
            self.calls[index] = len(self.output) - 1
            events.append(self._event("response.output_item.added", output_index=self.calls[index], item=dict(item)))
        item = self.output[self.calls[index]]
        if fn.get("arguments"):
            item["arguments"] += fn["arguments"]
            events.append(
                self._event(
                    "response.function_call_arguments.delta",
                    item_id=item["id"],
                    output_index=self.calls[index],
                    delta=fn["arguments"],
                )
            )
        return events

    def _close_message(self) -> list[dict[str, Any]]:
        if self.text is None:
            return []
        index = len(self.output) - 1
        text = "".join(self.text)
        self.text = None
        item = self.output[index] = message_item(self.response_id, text)
        part = item["content"][0]
        where = {"item_id": item["id"], "output_index": index}
        return [
            self._event("response.output_text.done", **where, content_index=0, text=text, logprobs=[]),
            self._event("response.content_part.done", **where, content_index=0, part=part),
            self._event("response.output_item.done", output_index=index, item=item),
        ]

    def _close_calls(self) -> list[dict[str, Any]]:
        events: list[dict[str, Any]] = []
        for index in self.calls.values():
            item = self.output[index] = {**self.output[index], "status": "completed"}
            events.append(
                self._event(
                    "response.function_call_arguments.done",
                    item_id=item["id"],
                    output_index=index,
                    name=item["name"],
                    arguments=item["arguments"],
                )
            )
            events.append(self._event("response.output_item.done", output_index=index, item=item))
        self.calls = {}
        return events

    def complete(self, at: int) -> tuple[list[dict[str, Any]], dict[str, Any]]:
        """The closing events (ending with ``response.completed`` or ``.incomplete``) and the final Response."""
        events = self._close_message() + self._close_calls()
        response = finished(self.base, self.output, self.usage, self.finish_reason, at)
        kind = "response.completed" if response["status"] == "completed" else "response.incomplete"
        events.append(self._event(kind, response=response))
        return events, response

    def fail(self, error: Mapping[str, Any]) -> list[dict[str, Any]]:
        """``error`` (an OpenAI error body's ``error``) as an ``error`` event, then ``response.failed``; open
        items are left as they were.

        The Response error codes are a closed list: a provider's other codes become ``server_error``
        (the message keeps what the provider said)."""
        given = error.get("code") or error.get("type")
        code = "rate_limit_exceeded" if given in ("rate_limit_exceeded", "rate_limit_error") else "server_error"
        failed = {
            **self.base,
            "status": "failed",
            "output": self.output,
            "error": {"code": code, "message": str(error.get("message") or "the provider failed")},
        }
        message = failed["error"]["message"]
        return [
            self._event("error", code=code, message=message, param=error.get("param")),
            self._event("response.failed", response=failed),
        ]
