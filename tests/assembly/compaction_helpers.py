"""Build contexts and run multi-turn conversations through the real pipeline, for compaction tests."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from gateway.assembly.context import Context, Env, Message, SessionState, Summarizer
from gateway.assembly.pipeline import Assembly, assemble
from gateway.assembly.plan_compaction import plan_compaction
from gateway.assembly.policy import Policy
from gateway.assembly.prefix import track_prefix
from gateway.assembly.summarize_range import summarize_range
from gateway.assembly.verify_assembly import is_gateway_block
from gateway.summarize.extractive import ExtractiveSummarizer
from gateway.tokens import counter_for

COUNTER = counter_for("o200k_base")


def make_ctx(
    messages: Sequence[Message],
    *,
    window: int = 8000,
    state: SessionState | None = None,
    summarizer: Summarizer | None = None,
    tools: Sequence[Message] | None = None,
    params: dict[str, Any] | None = None,
) -> Context:
    env = Env(counter=COUNTER, context_window=window, model="small-window", summarizer=summarizer)
    return Context(
        messages=tuple(messages),
        tools=tuple(tools) if tools is not None else None,
        params=params or {"model": "small-window"},
        env=env,
        session=state or SessionState(session_id="s-test"),
    )


def policy(**compaction: Any) -> Policy:
    """Compaction under test; shrink_oversize off, since on tiny windows it (rightly) refuses a request
    that cannot fit, and its own properties are tested in test_shrink_oversize.py."""
    return Policy(compaction=compaction, shrink_oversize={"enabled": False})


@dataclass
class CountingSummarizer:
    """Wraps a summariser and counts its calls (the real extractive one by default)."""

    inner: Summarizer = field(default_factory=lambda: ExtractiveSummarizer(COUNTER))
    calls: int = 0

    @property
    def name(self) -> str:
        return self.inner.name

    def __call__(self, messages: tuple[Message, ...], previous: str | None, max_tokens: int) -> str:
        self.calls += 1
        return self.inner(messages, previous, max_tokens)


def turn(k: int, *, result_words: int = 60, fact: str = "") -> list[dict[str, Any]]:
    """One agent turn: user asks, assistant calls a tool, the tool answers, the assistant replies."""
    call = f"call_{k}"
    return [
        {"role": "user", "content": f"Step {k}: check the next item. {fact}".strip()},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [{"id": call, "type": "function", "function": {"name": "search_docs", "arguments": "{}"}}],
        },
        {"role": "tool", "tool_call_id": call, "content": f"Result {k}: " + "plain filler words " * result_words},
        {"role": "assistant", "content": f"Done with step {k}."},
    ]


HEAD: list[dict[str, Any]] = [
    {"role": "system", "content": "You are a careful agent."},
    {"role": "user", "content": "Goal: migrate the billing service without downtime."},
]


def conversation(turns: int, **kw: Any) -> list[dict[str, Any]]:
    out = list(HEAD)
    for k in range(turns):
        out += turn(k, **kw)
    return out


def saved_state(result: Assembly) -> SessionState:
    """The session state as the API saves it: with the keys of the blocks this turn went out with."""
    return replace(result.assembled.session, previous_prefix=track_prefix(result.assembled).keys())


def run_turns(
    histories: Sequence[Sequence[Message]],
    pol: Policy,
    *,
    window: int = 8000,
    summarizer: Summarizer | None = None,
    tools: Sequence[Message] | None = None,
    prepare_ahead: bool = False,
) -> list[Assembly]:
    """Assemble each history in order, carrying the session state like the API does.

    ``prepare_ahead``: after each turn, prepare the planned checkpoint as ``edges/compaction``
    does in the background (here at once, so the next turn finds it)."""
    state = SessionState(session_id="s-test")
    out = []
    for history in histories:
        ctx = make_ctx(history, window=window, state=state, summarizer=summarizer, tools=tools)
        result = assemble(ctx, pol)
        state = saved_state(result)
        plan = plan_compaction(ctx, result.assembled, pol.compaction) if prepare_ahead else None
        if plan is not None:
            made = summarize_range(
                plan.messages, plan.start, plan.end, plan.previous, summarizer, pol.compaction, COUNTER
            )
            state = replace(state, checkpoints=(*state.checkpoints, made.checkpoint))
        out.append(result)
    return out


def rewrites(results: Sequence[Assembly]) -> list[int]:
    """Turns whose forwarded messages do not extend the previous turn's: the provider's cache restarts there.

    The previous turn's trailing gateway blocks (reminder, recalled passages) are left out, as they
    are meant to change."""
    out = []
    for k in range(1, len(results)):
        before = list(results[k - 1].assembled.messages)
        while before and is_gateway_block(before[-1]) and before[-1].get("role") != "tool":
            before.pop()
        if list(results[k].assembled.messages[: len(before)]) != before:
            out.append(k)
    return out
