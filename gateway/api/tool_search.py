"""Serve ``find_tools``, the search tool the gateway offers when it prunes, for any provider.

When ``prune_tools`` removes tools it appends ``find_tools(query)`` (``tool_modes.FIND_TOOLS``).
If the model calls it, that answer never reaches the client: the offered tools that best
match the query (BM25 over the tool documents, ``find_top`` of them) are added to the
session's sticky set, the same request is sent again with the grown set (still ending with
``find_tools`` while tools remain hidden), and the model's next answer is returned. After
``max_searches`` searches in one client request the request goes out with every tool the
client offered: a search never makes a request worse than not pruning. The client sees the
extra round trips only in the usage it is billed for (every call's usage summed) and in
the ``find_tools`` decisions of the request's record.

Streaming works the same way: the upstream stream is held back until its first text or
first tool call shows whether it is a ``find_tools`` call (then it is read to its end and
the request sent again) or an answer (then what was held and the rest are relayed). A
model that writes text and then calls ``find_tools`` in one answer has its text relayed
already; that call reaches the client as it is.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from dataclasses import replace
from typing import Any, Protocol

import orjson

from gateway.api.deps import Gateway
from gateway.assembly.context import Decision
from gateway.assembly.prune_tools import ToolPolicy
from gateway.assembly.tool_modes import FIND_TOOLS, FIND_TOOLS_NAME
from gateway.assembly.tool_scoring import get_scorer, tool_document, tool_name
from gateway.config import ModelConfig
from gateway.sessions.protocol import SessionStore
from gateway.store.record import Forwarded
from gateway.tokens import TokenCounter

PASS = "find_tools"


class Stream(Protocol):
    def chunks(self) -> AsyncIterator[bytes]: ...

    async def aclose(self) -> None: ...


Send = Callable[[dict[str, Any], bytes | None], Awaitable[dict[str, Any]]]
Open = Callable[[dict[str, Any], bytes | None], Awaitable[Stream]]


def served_search(outgoing: Mapping[str, Any], client_tools: Sequence[Mapping[str, Any]] | None) -> bool:
    """Whether ``outgoing`` carries the gateway's own ``find_tools`` (not a client tool of that name)."""
    tools = outgoing.get("tools")
    if not tools or tool_name(tools[-1]) != FIND_TOOLS_NAME:
        return False
    return not any(tool_name(t) == FIND_TOOLS_NAME for t in client_tools or ())


def search_query(message: Mapping[str, Any]) -> str | None:
    """The query of the ``find_tools`` call in an assistant message, or None when there is none."""
    for call in message.get("tool_calls") or ():
        fn = call.get("function") if isinstance(call, Mapping) else None
        if isinstance(fn, Mapping) and fn.get("name") == FIND_TOOLS_NAME:
            try:
                args = orjson.loads(fn.get("arguments") or "{}")
            except orjson.JSONDecodeError:
                args = {}
            query = args.get("query") if isinstance(args, dict) else None
            return str(query) if query else ""
    return None


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


class ToolSearch:
    """One client request's ``find_tools`` loop: search, grow the session's set, send again."""

    def __init__(
        self,
        *,
        client_tools: Sequence[Mapping[str, Any]],
        session_id: str,
        sessions: SessionStore,
        policy: ToolPolicy,
        counter: TokenCounter,
    ) -> None:
        self.client_tools = list(client_tools)
        self.session_id = session_id
        self.sessions = sessions
        self.policy = policy
        self.counter = counter
        self.searches = 0
        self.expansions: list[Decision] = []  # one ``expanded`` decision per search answered
        self.sent: dict[str, Any] | None = None  # the last body sent, once a search grew it
        self.usage: dict[str, Any] | None = None  # usage of the calls the client does not see

    async def complete(self, send: Send, outgoing: dict[str, Any], raw: bytes | None) -> dict[str, Any]:
        """Send ``outgoing``; while the model calls ``find_tools``, grow the tools and send again."""
        data = await send(outgoing, raw)
        while True:
            choice = (data.get("choices") or [{}])[0]
            query = search_query(choice.get("message") or {})
            if query is None or not served_search(outgoing, self.client_tools):
                break  # an answer, or a call to a find_tools no longer offered: the client gets it
            self.usage = add_usage(self.usage, data.get("usage"))
            outgoing = await self.expand(outgoing, query)
            data = await send(outgoing, None)
        if self.usage:
            data["usage"] = add_usage(self.usage, data.get("usage"))
        return data

    async def open_stream(self, open_: Open, outgoing: dict[str, Any], raw: bytes | None) -> Stream:
        """Open the stream of ``outgoing``; the returned stream serves ``find_tools`` calls itself."""
        return _SearchingStream(self, open_, outgoing, await open_(outgoing, raw))

    async def expand(self, outgoing: dict[str, Any], query: str) -> dict[str, Any]:
        """``outgoing`` with the tools matching ``query`` added, and the session's set grown to match."""
        self.searches += 1
        current = [tool_name(t) for t in outgoing.get("tools") or () if tool_name(t) != FIND_TOOLS_NAME]
        hidden = [t for t in self.client_tools if tool_name(t) not in set(current)]
        found = self._matches(query, hidden)
        final = self.searches > self.policy.max_searches or not found
        added = [tool_name(t) for t in (hidden if final else found)]
        names = [*current, *dict.fromkeys(added)]
        tools = [t for n in names for t in self.client_tools if tool_name(t) == n]
        rest = len(names) < len({tool_name(t) for t in self.client_tools})
        body = {**outgoing, "tools": [*tools, FIND_TOOLS] if rest else tools}
        await self._grow_session(names)
        before = self.counter.tools(outgoing.get("tools"))
        reason = (
            f"find_tools({query!r}): "
            + (f"added {', '.join(added)}" if added else "nothing left to add")
            + ("; every offered tool sent" if final else "")
        )
        detail = {"query": query, "added": added, "search": self.searches, "all": final}
        decision = Decision(PASS, "expanded", before, self.counter.tools(body["tools"]), reason, detail)
        self.expansions.append(decision)
        self.sent = body
        return body

    def forwarded(self, sent: Forwarded) -> Forwarded:
        """``sent`` as it ended: the grown body the provider answered last, with the searches' decisions."""
        if self.sent is None:
            return sent
        decisions = (*sent.decisions, *(d.to_dict() for d in self.expansions))
        return replace(sent, assembled=self.sent, assembled_json=None, decisions=decisions)

    def _matches(self, query: str, hidden: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
        if not hidden:
            return []
        scores = get_scorer("bm25")(query, [tool_document(t) for t in hidden])
        ranked = sorted(range(len(hidden)), key=lambda i: (-scores[i], i))
        return [hidden[i] for i in ranked[: self.policy.find_top] if scores[i] > 0]

    async def _grow_session(self, names: Sequence[str]) -> None:
        """The next turn's assembly starts from the grown set: it stays byte-stable from here on."""
        state = await self.sessions.load(self.session_id)
        if tuple(names) != state.tool_set:
            changes = state.tool_set_changes + (1 if state.tool_set else 0)
            await self.sessions.save(replace(state, tool_set=tuple(names), tool_set_changes=changes))


class _SearchingStream:
    """An upstream stream whose ``find_tools`` answers are consumed and replaced by the next answer."""

    def __init__(self, search: ToolSearch, open_: Open, outgoing: dict[str, Any], first: Stream) -> None:
        self.search = search
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
                verdict = _verdict(payload) or verdict
                if verdict == "answer":
                    for kept in held:
                        yield self._billed(kept)
                    held = []
            if verdict != "search" or not served_search(self.outgoing, self.search.client_tools):
                for kept in held:
                    yield self._billed(kept)
                return
            message, usage = _reassemble(held)
            self.search.usage = add_usage(self.search.usage, usage)
            await self.current.aclose()
            self.outgoing = await self.search.expand(self.outgoing, search_query(message) or "")
            self.current = await self.open(self.outgoing, None)

    def _billed(self, payload: bytes) -> bytes:
        """The payload, its usage (if any) including the calls the client did not see."""
        if not self.search.usage or b'"usage"' not in payload:
            return payload
        chunk = orjson.loads(payload)
        if not isinstance(chunk, dict) or not chunk.get("usage"):
            return payload
        chunk["usage"] = add_usage(self.search.usage, chunk["usage"])
        return orjson.dumps(chunk)

    async def aclose(self) -> None:
        await self.current.aclose()


def _verdict(payload: bytes) -> str | None:
    """ "search" once a chunk starts a find_tools call, "answer" once it has text or another call."""
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
                return "search" if name == FIND_TOOLS_NAME else "answer"
        if delta.get("content"):
            return "answer"
    return None


def _reassemble(payloads: Sequence[bytes]) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """The assistant message of a held stream (its tool calls), and its usage."""
    calls: dict[int, dict[str, Any]] = {}
    usage: dict[str, Any] | None = None
    for payload in payloads:
        chunk = orjson.loads(payload)
        if not isinstance(chunk, dict):
            continue
        usage = chunk.get("usage") or usage
        for choice in chunk.get("choices") or ():
            for call in (choice.get("delta") or {}).get("tool_calls") or ():
                slot = calls.setdefault(int(call.get("index", 0)), {"function": {"name": "", "arguments": ""}})
                fn = call.get("function") or {}
                slot["function"]["name"] += fn.get("name") or ""
                slot["function"]["arguments"] += fn.get("arguments") or ""
    return {"tool_calls": [calls[i] for i in sorted(calls)]}, usage


def tool_search(
    gw: Gateway,
    model: ModelConfig,
    session_id: str,
    body: Mapping[str, Any],
    outgoing: Mapping[str, Any],
) -> ToolSearch | None:
    """The ``find_tools`` loop of this request, or None when the gateway did not offer ``find_tools``."""
    client_tools = body.get("tools") or ()
    if not served_search(outgoing, client_tools):
        return None
    return ToolSearch(
        client_tools=client_tools,
        session_id=session_id,
        sessions=gw.sessions,
        policy=gw.settings.policy.tools,
        counter=gw.counter(model),
    )
