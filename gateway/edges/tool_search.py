"""Serve ``find_tools``, the search tool the gateway offers when it prunes, for any provider.

When ``prune_tools`` removes tools it appends ``find_tools(query)`` (``tool_modes.FIND_TOOLS``).
If the model calls it, that answer never reaches the client (``edges/served_tools.py`` runs the
loop, streamed or not): the offered tools that best match the query (BM25 over the tool
documents, ``find_top`` of them), and what a fresh selection keeps for the conversation as it now
stands (``prune_tools.session_selection``: the set changes anyway, so everything the session has
come to need joins in that one change), and the other tools of the found tools' apps
(``session_scores.app_groups``, within ``budget_tokens``: a session working in an app asks for its
other tools next) are appended to the session's sticky set, the same request is
sent again with the grown set (still offering ``find_tools`` while tools remain hidden), and
the model's next answer is returned. After ``max_searches`` searches in one client request the
request goes out with every tool the client offered: a search never makes a request worse than
not pruning. Another tool the gateway added (the recall tool) stays, after them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from functools import partial
from typing import Any

from gateway.api.deps import Gateway
from gateway.assembly.context import Decision, SessionState
from gateway.assembly.prune_tools import ToolPolicy, session_selection
from gateway.assembly.tool_modes import FIND_TOOLS, FIND_TOOLS_NAME
from gateway.assembly.tool_scoring import get_scorer, tool_document, tool_name
from gateway.assembly.tool_scoring.session_scores import app_groups
from gateway.config import ModelConfig
from gateway.edges.served_tools import call_arguments, offers_own
from gateway.sessions.protocol import SessionStore
from gateway.tokens import TokenCounter

PASS = "find_tools"


def served_search(outgoing: Mapping[str, Any], client_tools: Sequence[Mapping[str, Any]] | None) -> bool:
    """Whether ``outgoing`` carries the gateway's own ``find_tools`` (not a client tool of that name)."""
    return offers_own(outgoing, client_tools, FIND_TOOLS_NAME)


def search_query(message: Mapping[str, Any]) -> str | None:
    """The query of the ``find_tools`` call in an assistant message, or None when there is none."""
    for call in message.get("tool_calls") or ():
        fn = call.get("function") if isinstance(call, Mapping) else None
        if isinstance(fn, Mapping) and fn.get("name") == FIND_TOOLS_NAME:
            query = call_arguments(call).get("query")
            return str(query) if query else ""
    return None


class ToolSearch:
    """One client request's ``find_tools`` handler: search, grow the session's set, send again."""

    name = FIND_TOOLS_NAME

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
        self.session_id = session_id  # the scoped key the session's state lives under
        self.sessions = sessions
        self.policy = policy
        self.counter = counter
        self.searches = 0

    async def answer(
        self, outgoing: dict[str, Any], message: Mapping[str, Any]
    ) -> tuple[dict[str, Any], list[Decision]]:
        """The served loop's handler: ``outgoing`` grown by what the call's query finds."""
        return await self.expand(outgoing, search_query(message) or "")

    async def expand(self, outgoing: dict[str, Any], query: str) -> tuple[dict[str, Any], list[Decision]]:
        """``outgoing`` with the tools matching ``query`` added, the session's set grown to match, and
        the ``expanded`` decision."""
        self.searches += 1
        client_names = {tool_name(t) for t in self.client_tools}
        offered = outgoing.get("tools") or ()
        current = [tool_name(t) for t in offered if tool_name(t) in client_names]
        own = [t for t in offered if tool_name(t) not in client_names and tool_name(t) != FIND_TOOLS_NAME]
        hidden = [t for t in self.client_tools if tool_name(t) not in set(current)]
        found = self._matches(query, hidden)
        final = self.searches > self.policy.max_searches or not found
        added = [tool_name(t) for t in (hidden if final else found)]
        if not final:  # the set changes now: take in what the session needs by now, not one search per tool
            messages = outgoing.get("messages") or ()
            fresh = session_selection(messages, self.client_tools, self.policy, self.counter)
            have = {*current, *added}
            added += [n for n in fresh if n not in have]
            added += self._app_mates([tool_name(t) for t in found], {*current, *added})
        names = [*current, *dict.fromkeys(added)]
        tools = [t for n in names for t in self.client_tools if tool_name(t) == n]
        rest = len(names) < len(client_names)
        body = {**outgoing, "tools": [*tools, *([FIND_TOOLS] if rest else []), *own]}
        await self._grow_session(names)
        before = self.counter.tools(offered)
        reason = (
            f"find_tools({query!r}): "
            + (f"added {', '.join(added)}" if added else "nothing left to add")
            + ("; every offered tool sent" if final else "")
        )
        detail = {"query": query, "added": added, "search": self.searches, "all": final}
        decision = Decision(PASS, "expanded", before, self.counter.tools(body["tools"]), reason, detail)
        return body, [decision]

    def _app_mates(self, found: Sequence[str], current: set[str]) -> list[str]:
        """The other tools of the apps the found tools belong to (``app_groups``), within ``budget_tokens``."""
        groups = app_groups(self.client_tools)
        index = {tool_name(t): i for i, t in enumerate(self.client_tools)}
        taken = set(found) | current
        out: list[str] = []
        spent = 0
        for name in found:
            for j in sorted(groups[index[name]]) if name in index else ():
                mate = self.client_tools[j]
                if tool_name(mate) in taken:
                    continue
                cost = self.counter.tool(mate)
                if spent + cost > self.policy.budget_tokens:
                    return out
                taken.add(tool_name(mate))
                out.append(tool_name(mate))
                spent += cost
        return out

    def _matches(self, query: str, hidden: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
        if not hidden:
            return []
        scores = get_scorer("bm25")(query, [tool_document(t) for t in hidden])
        ranked = sorted(range(len(hidden)), key=lambda i: (-scores[i], i))
        return [hidden[i] for i in ranked[: self.policy.find_top] if scores[i] > 0]

    async def _grow_session(self, names: Sequence[str]) -> None:
        """The next turn's assembly starts from the grown set: it stays byte-stable from here on.

        Applied atomically to what is stored now (``SessionStore.update``): a concurrent turn's
        save, or another request's search, on any worker, neither loses this growth nor is lost
        to it. Tools another request added meanwhile stay, before this request's new ones."""
        await self.sessions.update(self.session_id, partial(_grown, tuple(names)))


def _grown(names: tuple[str, ...], state: SessionState) -> SessionState:
    """``state`` with ``names`` in its tool set (kept in order, after what it holds that they lack)."""
    merged = names if not state.tool_set else (*names, *(n for n in state.tool_set if n not in names))
    if merged == state.tool_set:
        return state
    return replace(state, tool_set=merged, tool_set_changes=state.tool_set_changes + (1 if state.tool_set else 0))


def tool_search(
    gw: Gateway,
    model: ModelConfig,
    scoped: str,
    body: Mapping[str, Any],
    outgoing: Mapping[str, Any],
) -> ToolSearch | None:
    """The ``find_tools`` handler of this request, or None when the gateway did not offer ``find_tools``.

    ``scoped``: the key the session's state lives under (``scope_session``), which the grown set is saved to."""
    client_tools = body.get("tools") or ()
    if not served_search(outgoing, client_tools):
        return None
    return ToolSearch(
        client_tools=client_tools,
        session_id=scoped,
        sessions=gw.sessions,
        policy=gw.settings.policy.tools,
        counter=gw.counter(model),
    )
