"""Answer ``recall_archive``, the recall tool the gateway offers in ``policy.memory.mode: tool``.

Inline recall guesses from the question which archived turns to place; the tool lets the model
ask, with its own words, only when it misses something. ``recall_memory`` offers the tool once
the session has an archive; when the model calls it, ``edges/served_tools.py`` hands the call
here: each call's ``query`` is ranked against the session's archived passages (the owner's
under ``scope: owner``, never another caller's: the archive is keyed by the scoped session and
the owner includes the caller), the passages are chosen exactly as inline recall chooses them
(``select_passages``), and the next request carries the model's call and a tool result holding
the ``<recalled>`` block. The client never sees the call. Other calls in the same message are
left out of that next request (each call sent needs its result); the model makes them again once
it has read the passages, as after a ``find_tools`` search. After ``max_recalls`` answered calls
the tool is no longer offered in that request, so the model must answer.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from gateway.assembly.context import Decision
from gateway.assembly.memory_blocks import RECALL_TOOL_NAME, recalled_message
from gateway.assembly.recall_memory import PASS, MemoryPolicy
from gateway.assembly.select_passages import passage_detail, select_passages
from gateway.assembly.tool_scoring import tool_name
from gateway.edges.memory import MemoryRuntime, said_before
from gateway.edges.served_tools import call_arguments, offers_own
from gateway.tokens import TokenCounter

#: What the model reads when nothing archived matches (so it answers rather than asks again).
NOTHING_FOUND = "No earlier turn of this conversation matches that query."


class RecallTool:
    """One client request's ``recall_archive`` handler: search the archive, append the call and its result."""

    name = RECALL_TOOL_NAME

    def __init__(
        self,
        *,
        memory: MemoryRuntime,
        session_id: str,
        owner: str | None,
        policy: MemoryPolicy,
        counter: TokenCounter,
        history: int,
    ) -> None:
        self.memory = memory
        self.session_id = session_id  # the scoped key: the archive of this caller's session only
        self.owner = owner
        self.policy = policy
        self.counter = counter
        self.history = history  # messages the client sent: passages archived past them are a rewound branch's
        self.calls = 0

    async def answer(
        self, outgoing: dict[str, Any], message: Mapping[str, Any]
    ) -> tuple[dict[str, Any], list[Decision]]:
        """``outgoing`` with the model's recall calls and their results appended, and a ``recall_served``
        decision for each call."""
        calls = [
            {**call, "id": call.get("id") or f"call_recall_{self.calls}_{k}", "type": "function"}
            for k, call in enumerate(message.get("tool_calls") or ())
            if tool_name(call) == RECALL_TOOL_NAME
        ]
        messages = list(outgoing.get("messages") or ())
        answered = [await self._result(str(call_arguments(c).get("query") or ""), c["id"], messages) for c in calls]
        results = [result for result, _ in answered]
        asked = {"role": "assistant", "content": message.get("content"), "tool_calls": calls}
        body = {**outgoing, "messages": [*messages, asked, *results]}
        if self.calls >= self.policy.max_recalls:  # the last answer: the model has to reply now
            tools = [t for t in outgoing.get("tools") or () if tool_name(t) != RECALL_TOOL_NAME]
            body["tools"] = tools
            if not tools:
                body = {k: v for k, v in body.items() if k not in ("tools", "tool_choice", "parallel_tool_calls")}
        return body, [decision for _, decision in answered]

    async def _result(
        self, query: str, call_id: str, messages: Sequence[Mapping[str, Any]]
    ) -> tuple[dict[str, Any], Decision]:
        """The tool message answering one call, and its ``recall_served`` decision."""
        self.calls += 1
        found = await self.memory.search(query, self.session_id, self.owner) if query.strip() else []
        # as inline recall (edges/memory.py): nothing archived past the history the client sent
        chosen = select_passages(said_before(found, self.session_id, self.history), messages, self.policy, self.counter)
        content = (
            str(recalled_message([c.passage for c in chosen], inline=False)["content"]) if chosen else NOTHING_FOUND
        )
        result = {"role": "tool", "tool_call_id": call_id, "content": content}
        passages = [passage_detail(c.passage) for c in chosen]
        decision = Decision(
            PASS,
            "recall_served",
            tokens_after=self.counter.message(result),
            reason=f"{RECALL_TOOL_NAME}({query!r}) answered by the gateway with {len(chosen)} passage(s)",
            detail={"query": query, "call": self.calls, "passages": passages},
        )
        return result, decision


def recall_tool(
    memory: MemoryRuntime,
    counter: TokenCounter,
    scoped: str,
    owner: str | None,
    client_tools: Sequence[Mapping[str, Any]],
    outgoing: Mapping[str, Any],
    history: int,
) -> RecallTool | None:
    """The ``recall_archive`` handler of this request, or None when the gateway did not offer the tool.
    ``history``: how many messages the client sent."""
    if not offers_own(outgoing, client_tools, RECALL_TOOL_NAME):
        return None
    return RecallTool(
        memory=memory, session_id=scoped, owner=owner, policy=memory.policy, counter=counter, history=history
    )
