"""Turn a Chat Completions body into the Context the pipeline works on, and back.

Shared by the API (live traffic), replay (logged or imported traffic) and ``ventana lint``,
so all three assemble exactly the same Context from the same body.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from gateway.assembly.context import Context, Env, SessionState

#: Request fields that belong to Ventana and never reach the provider.
EXTENSION_FIELDS = ("documents", "document_policy", "ventana")


def context_from_body(body: Mapping[str, Any], env: Env, state: SessionState) -> Context:
    params = {k: v for k, v in body.items() if k not in ("messages", "tools") and k not in EXTENSION_FIELDS}
    extensions = {k: body[k] for k in EXTENSION_FIELDS if k in body}
    tools = body.get("tools")
    return Context(
        messages=tuple(body["messages"]),
        tools=tuple(tools) if tools is not None else None,
        params=params,
        env=env,
        session=state,
        extensions=extensions,
    )
