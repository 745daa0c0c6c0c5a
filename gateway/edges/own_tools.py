"""Which of the gateway's own tools a request carries, and the loop that answers them.

``answer_chat`` asks once per request, after assembly: ``find_tools`` when ``prune_tools``
offered it, ``recall_archive`` when ``recall_memory`` did (tool mode). None when neither is
offered: the request then goes upstream once, as the client's requests always did.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from gateway.api.deps import Gateway
from gateway.config import ModelConfig
from gateway.edges.recall_tool import recall_tool
from gateway.edges.served_tools import ServedTool, ServedTools, adds_tools
from gateway.edges.tool_search import tool_search
from gateway.memory.profile import owner_of

if TYPE_CHECKING:
    from gateway.edges.edges import Turn


def own_tools(gw: Gateway, model: ModelConfig, turn: Turn, outgoing: Mapping[str, Any]) -> ServedTools | None:
    """The served-tools loop of this request, or None when the gateway added no tool of its own.

    A request forwarded with no tools, or with the client's own tool objects, carries none of the gateway's:
    it steps aside before asking each tool (its counter, the body's owner), as most requests do."""
    client_tools = turn.body.get("tools") or ()
    if not adds_tools(outgoing, client_tools):
        return None
    handlers: list[ServedTool | None] = [
        tool_search(gw, model, turn.scoped, turn.body, outgoing),
        recall_tool(
            gw.edges.memory,
            gw.counter(model),
            turn.scoped,
            owner_of(turn.body, turn.caller),
            client_tools,
            outgoing,
            len(turn.body.get("messages") or ()),
        ),
    ]
    served = [h for h in handlers if h is not None]
    return ServedTools(client_tools=client_tools, tools=served) if served else None
