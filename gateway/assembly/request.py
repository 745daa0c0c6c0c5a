"""Turn a Chat Completions body into the Context the pipeline works on, and back.

Shared by the API (live traffic), replay (logged or imported traffic) and ``ventana lint``,
so all three assemble exactly the same Context from the same body.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from gateway.assembly.context import Context, Env, SessionState
from gateway.object_memo import ObjectMemo

#: Request fields that belong to Ventana and never reach the provider.
EXTENSION_FIELDS = ("documents", "document_policy", "ventana")
#: The tuple a body's tool list is read as, per list object. An agent's unchanged tools are last turn's list
#: (``api.incremental_parse``), so its tuple is last turn's too, and what is kept by the tuple (its token
#: count, ~20 look-ups a request at 20 tools) is found again. Process-wide and pure: a cache, not state.
_TOOL_TUPLES: ObjectMemo[tuple[Any, ...]] = ObjectMemo(limit=256)


def context_from_body(body: Mapping[str, Any], env: Env, state: SessionState) -> Context:
    params = {k: v for k, v in body.items() if k not in ("messages", "tools") and k not in EXTENSION_FIELDS}
    extensions = {k: body[k] for k in EXTENSION_FIELDS if k in body}
    tools = body.get("tools")
    if tools is not None:
        tools = _TOOL_TUPLES.get_or(tools, tuple) if tools.__class__ is list else tuple(tools)
    return Context(
        messages=tuple(body["messages"]),
        tools=tools,
        params=params,
        env=env,
        session=state,
        extensions=extensions,
    )
