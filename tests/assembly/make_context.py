"""Build a pipeline Context the way ``api/chat.py`` does, for pass-level tests."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from gateway.assembly.context import Context, Env, SessionState, Summarizer
from gateway.assembly.request import context_from_body
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
    return context_from_body(body, env, SessionState("test-session"))
