"""Build a pipeline Context the way ``api/chat.py`` does, for pass-level tests."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from gateway.api.chat import EXTENSION_FIELDS
from gateway.assembly.context import Context, Env, SessionState, Summarizer
from gateway.tokens import counter_for


def timestamp(iso: str) -> float:
    return datetime.fromisoformat(iso.replace("Z", "+00:00")).timestamp()


def make_context(
    body: Mapping[str, Any],
    *,
    now: str = "2026-09-23T12:00:00Z",
    context_window: int = 128_000,
    summarizer: Summarizer | None = None,
) -> Context:
    """A Context for ``body`` (messages, tools, extension fields) on gpt-4o-mini's tokenizer."""
    env = Env(
        counter=counter_for("o200k_base"),
        context_window=context_window,
        model=str(body.get("model", "gpt-4o-mini")),
        now=timestamp(now),
        summarizer=summarizer,
    )
    tools: Sequence[Any] | None = body.get("tools")
    return Context(
        messages=tuple(body["messages"]),
        tools=tuple(tools) if tools is not None else None,
        params={k: v for k, v in body.items() if k not in ("messages", "tools", *EXTENSION_FIELDS)},
        env=env,
        session=SessionState("test-session"),
        extensions={k: body[k] for k in EXTENSION_FIELDS if k in body},
    )
