"""Answer the tools the gateway offers itself, so the client only ever sees the model's real answer.

The gateway appends tools of its own to some requests: ``find_tools`` when it prunes
(``edges/tool_search.py``) and ``recall_archive`` in recall's tool mode (``edges/recall_tool.py``).
When the model calls one of them, that answer never reaches the client: the tool's handler
turns the call into the next request (a grown tool list, or the call and its result appended),
that request goes upstream, and the loop goes on until the model answers with text or with a
call to a client tool. Each handler bounds its own rounds (after its last one it stops offering
its tool), so the loop ends. The client sees the extra round trips only in the usage it is
billed for (every call's usage summed) and in the request's record (the handlers' decisions,
and the last body sent as ``assembled``).

Streaming works the same way: the upstream stream is held back until its first text or first
tool call shows whether it is a served call (then it is read to its end and the next request
sent) or an answer (then what was held and the rest are relayed). A model that writes text
and then calls a served tool in one answer has its text relayed already; that call reaches the
client as it is.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

import orjson

from gateway.assembly.context import Decision
from gateway.assembly.tool_scoring import tool_name
from gateway.decision_tally import STEP_PASS
from gateway.object_memo import same_objects
from gateway.store.record import Forwarded
from gateway.tokens import TokenCounter
from gateway.upstream.usage import Usage, normalise_usage


@dataclass(slots=True)
class Call:
    """One upstream call of a served loop: the body sent, its usage, the served tool it asked for
    (None: the answer the client got), and what the tool's handler decided before the next call."""

    body: Mapping[str, Any]
    usage: Mapping[str, Any] | None = None
    called: str | None = None
    decisions: list[Decision] = field(default_factory=list)


class Stream(Protocol):
    def chunks(self) -> AsyncIterator[bytes]: ...

    async def aclose(self) -> None: ...


Send = Callable[[dict[str, Any], bytes | None], Awaitable[dict[str, Any]]]
Open = Callable[[dict[str, Any], bytes | None], Awaitable[Stream]]


class ServedTool(Protocol):
    """One tool the gateway answers itself."""

    name: str

    async def answer(
        self, outgoing: dict[str, Any], message: Mapping[str, Any]
    ) -> tuple[dict[str, Any], list[Decision]]:
        """The next request, given the one sent and the model's message calling this tool, and what was decided."""
        ...


def adds_tools(outgoing: Mapping[str, Any], client_tools: Sequence[Mapping[str, Any]] | None) -> bool:
    """Whether ``outgoing`` may carry a tool the gateway added: it has tools, and they are not the client's own
    tool objects in order. False for most requests, told without reading a name."""
    offered = outgoing.get("tools")
    if not offered:
        return False
    return not same_objects(offered, client_tools or ())


def offers_own(outgoing: Mapping[str, Any], client_tools: Sequence[Mapping[str, Any]] | None, name: str) -> bool:
    """Whether ``outgoing`` carries the gateway's own tool ``name`` (not a client tool of that name)."""
    if not adds_tools(outgoing, client_tools):
        return False
    offered, sent = outgoing["tools"], client_tools or ()
    if not any(tool_name(t) == name for t in offered):
        return False
    return not any(tool_name(t) == name for t in sent)


def called_names(message: Mapping[str, Any]) -> list[str]:
    """The names of the functions an assistant message calls, in order."""
    names = []
    for call in message.get("tool_calls") or ():
        fn = call.get("function") if isinstance(call, Mapping) else None
        if isinstance(fn, Mapping):
            names.append(str(fn.get("name") or ""))
    return names


def call_arguments(call: Mapping[str, Any]) -> dict[str, Any]:
    """A tool call's arguments as a dict ({} when they are not a JSON object)."""
    fn = call.get("function")
    raw = fn.get("arguments") if isinstance(fn, Mapping) else None
    try:
        args = orjson.loads(raw or "{}")
    except orjson.JSONDecodeError:
        return {}
    return args if isinstance(args, dict) else {}


def add_usage(total: Mapping[str, Any] | None, more: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """Two usage blocks summed field by field (nested details included); None when both are."""
    if not total:
        return dict(more) if more else None
    if not more:
        return dict(total)
    out = dict(total)
    for key, value in more.items():
        mine = out.get(key)
        if isinstance(value, bool):
            continue
        if isinstance(value, int | float) and isinstance(mine, int | float | None):
            out[key] = (mine or 0) + value
        elif isinstance(value, Mapping):
            out[key] = add_usage(mine if isinstance(mine, Mapping) else None, value)
    return out


class ServedTools:
    """One client request's loop over the gateway's own tools: answer, send again, until a real answer."""

    def __init__(self, *, client_tools: Sequence[Mapping[str, Any]], tools: Sequence[ServedTool]) -> None:
        self.client_tools = list(client_tools)
        self.tools = list(tools)
        self.usage: dict[str, Any] | None = None  # usage of the calls the client does not see
        self.decisions: list[Decision] = []  # the handlers' decisions, in the order they were made
        self.sent: dict[str, Any] | None = None  # the last body sent, once a handler made one
        self.calls: list[Call] = []  # every upstream call, in order, once the loop has begun

    def served(self, outgoing: Mapping[str, Any], names: Sequence[str]) -> ServedTool | None:
        """The handler of the first served tool among ``names`` that ``outgoing`` offers, if any."""
        for name in names:
            for tool in self.tools:
                if tool.name == name and offers_own(outgoing, self.client_tools, name):
                    return tool
        return None

    async def complete(self, send: Send, outgoing: dict[str, Any], raw: bytes | None) -> dict[str, Any]:
        """Send ``outgoing``; while the model calls a served tool, answer it and send again."""
        data = await send(outgoing, raw)
        while True:
            message = ((data.get("choices") or [{}])[0]).get("message") or {}
            tool = self.served(outgoing, called_names(message))
            if tool is None:
                self.calls.append(Call(outgoing, data.get("usage")))
                break  # an answer, or a call to a tool no longer served: the client gets it
            self.usage = add_usage(self.usage, data.get("usage"))
            self.calls.append(Call(outgoing, data.get("usage"), tool.name))
            outgoing = await self.next_request(tool, outgoing, message)
            data = await send(outgoing, None)
        if self.usage:
            data["usage"] = add_usage(self.usage, data.get("usage"))
        return data

    async def open_stream(self, open_: Open, outgoing: dict[str, Any], raw: bytes | None) -> Stream:
        """Open the stream of ``outgoing``; the returned stream answers served calls itself."""
        return _ServingStream(self, open_, outgoing, await open_(outgoing, raw))

    async def next_request(
        self, tool: ServedTool, outgoing: dict[str, Any], message: Mapping[str, Any]
    ) -> dict[str, Any]:
        """The handler's next request, kept as what the model saw last."""
        body, decisions = await tool.answer(outgoing, message)
        self.decisions.extend(decisions)
        if self.calls:
            self.calls[-1].decisions.extend(decisions)
        self.sent = body
        return body

    def forwarded(self, sent: Forwarded, counter: TokenCounter, billed: Usage) -> tuple[Forwarded, int]:
        """``sent`` as it ended, and the prompt tokens of the calls after the first.

        The record keeps the last body the provider answered as ``assembled``, and one
        ``served_tools`` / ``round`` step per upstream call with the tokens it sent and what it was
        billed, the handler's decisions after the call they answered. Every call is billed, so the
        request forwarded the sum of their prompts: a step after the first adds its prompt, less
        what its handler's decisions already count (the tools it added, the result it appended),
        so the passes' net savings stay the original minus all that was forwarded.
        """
        if self.sent is None:  # no handler answered: the request went out once, as forwarded
            return sent, 0
        calls = list(self.calls)
        if calls and calls[-1].called is not None:  # the last call sent failed: it was forwarded all the same
            calls.append(Call(self.sent))
        steps: list[dict[str, Any]] = []
        resent = 0
        left = billed
        previous: list[Decision] = []
        for k, call in enumerate(calls):
            tokens = counter.request(call.body.get("messages") or (), call.body.get("tools"))
            _, usage = normalise_usage(call.usage)
            if call.called is None:  # the answer's usage is what the client was billed, less the served calls
                usage = left
            left = _minus(left, usage)
            counted = sum(d.tokens_after - d.tokens_before for d in previous) if k else tokens
            if k:
                resent += tokens
            net = tokens - counted  # what this call adds beyond its handler's decisions (k > 0)
            before, after = (tokens, tokens) if not k else (0, net) if net >= 0 else (-net, 0)
            steps.append(
                Decision(
                    STEP_PASS,
                    "round",
                    before,
                    after,
                    (
                        f"call {k + 1}: the model called {call.called}, which the gateway answered"
                        if call.called
                        else f"call {k + 1}: the model answered"
                    )
                    + f"; {tokens:,} prompt tokens sent, {usage.prompt_tokens:,} billed",
                    {
                        "call": k + 1,
                        "prompt_tokens": tokens,
                        "called": call.called,
                        "billed": {
                            "prompt_tokens": usage.prompt_tokens,
                            "completion_tokens": usage.completion_tokens,
                            "cached_tokens": usage.cached_tokens,
                        },
                    },
                ).to_dict()
            )
            steps.extend(d.to_dict() for d in call.decisions)
            previous = call.decisions
        decisions = (*sent.decisions, *steps)
        return replace(sent, assembled=self.sent, assembled_json=None, decisions=decisions), resent


def _minus(a: Usage, b: Usage) -> Usage:
    return Usage(
        max(a.prompt_tokens - b.prompt_tokens, 0),
        max(a.completion_tokens - b.completion_tokens, 0),
        max(a.cached_tokens - b.cached_tokens, 0),
        max(a.cache_write_tokens - b.cache_write_tokens, 0),
    )


class _ServingStream:
    """An upstream stream whose served calls are consumed and replaced by the next answer."""

    def __init__(self, loop: ServedTools, open_: Open, outgoing: dict[str, Any], first: Stream) -> None:
        self.loop = loop
        self.open = open_
        self.outgoing = outgoing
        self.current = first

    async def chunks(self) -> AsyncIterator[bytes]:
        while True:
            held: list[bytes] = []
            verdict: str | None = None
            async for payload in self.current.chunks():
                if verdict == "answer":
                    yield self._billed(payload)
                    continue
                held.append(payload)
                verdict = self._verdict(payload) or verdict
                if verdict == "answer":
                    for kept in held:
                        yield self._billed(kept)
                    held = []
            message, usage = _reassemble(held) if verdict == "served" else ({}, None)
            tool = self.loop.served(self.outgoing, called_names(message))
            if tool is None:
                self.loop.calls.append(Call(self.outgoing))
                for kept in held:
                    yield self._billed(kept)
                return
            self.loop.usage = add_usage(self.loop.usage, usage)
            self.loop.calls.append(Call(self.outgoing, usage, tool.name))
            await self.current.aclose()
            self.outgoing = await self.loop.next_request(tool, self.outgoing, message)
            self.current = await self.open(self.outgoing, None)

    def _verdict(self, payload: bytes) -> str | None:
        """ "served" once a chunk starts a served call, "answer" once it has text or another call."""
        try:
            chunk = orjson.loads(payload)
        except orjson.JSONDecodeError:
            return "answer"  # let the relay report it
        if not isinstance(chunk, dict):
            return None
        for choice in chunk.get("choices") or ():
            delta = choice.get("delta") or {}
            for call in delta.get("tool_calls") or ():
                name = (call.get("function") or {}).get("name")
                if name:
                    return "served" if self.loop.served(self.outgoing, [name]) else "answer"
            if delta.get("content"):
                return "answer"
        return None

    def _billed(self, payload: bytes) -> bytes:
        """The payload, its usage (if any) including the calls the client did not see."""
        if not self.loop.usage or b'"usage"' not in payload:
            return payload
        chunk = orjson.loads(payload)
        if not isinstance(chunk, dict) or not chunk.get("usage"):
            return payload
        chunk["usage"] = add_usage(self.loop.usage, chunk["usage"])
        return orjson.dumps(chunk)

    async def aclose(self) -> None:
        await self.current.aclose()


def _reassemble(payloads: Sequence[bytes]) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """The assistant message of a held stream (its text and tool calls, with their ids), and its usage."""
    calls: dict[int, dict[str, Any]] = {}
    text: list[str] = []
    usage: dict[str, Any] | None = None
    for payload in payloads:
        chunk = orjson.loads(payload)
        if not isinstance(chunk, dict):
            continue
        usage = chunk.get("usage") or usage
        for choice in chunk.get("choices") or ():
            delta = choice.get("delta") or {}
            text.append(delta.get("content") or "")
            for call in delta.get("tool_calls") or ():
                slot = calls.setdefault(
                    int(call.get("index", 0)), {"id": "", "type": "function", "function": {"name": "", "arguments": ""}}
                )
                slot["id"] = call.get("id") or slot["id"]
                fn = call.get("function") or {}
                slot["function"]["name"] += fn.get("name") or ""
                slot["function"]["arguments"] += fn.get("arguments") or ""
    message = {"role": "assistant", "content": "".join(text) or None, "tool_calls": [calls[i] for i in sorted(calls)]}
    return message, usage
