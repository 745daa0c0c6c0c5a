"""Place recalled passages at the end of the request and the user's long-term facts after the system prompt.

Two memories, one pass (slot 6, after compaction decided what aged out of the window):

- Episodic recall (on by default): the API layer archived every range compaction replaced and, for this
  turn's question, hands in scored candidates (``memory_blocks.CANDIDATES_KEY``). The pass
  keeps those at or above ``min_score`` whose text the model does not already see, best
  first, at most ``max_passages`` and within ``recall_budget_tokens``, and places them in
  one ``<recalled>`` user message after the last message the client sent (before the reminder):
  the dynamic end, never inside the history. Placed before the question, it sat between turns the
  next request resends, so every recall rewrote the cached history from there on (in agent loops,
  from the task on). One ``recalled`` decision per passage (score, turns, tokens).
- Long-term memory (opt-in, ``long_term``): on a session's first turn the facts handed in
  (``memory_blocks.FACTS_KEY``) are rendered, newest first, within
  ``profile_budget_tokens`` into a ``<memory>`` system message right after the leading
  system/developer messages, and the rendered bytes are frozen in the session state.
  Every later turn sends the same bytes, so the block stays in the cached prefix; a fact
  learned mid-session waits for the next session.

Pure: no I/O, inputs never mutated, the same Context back when there is nothing to do.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any, Literal

from pydantic import Field, field_validator

from gateway.assembly.context import Context, Decision, Message, SessionState
from gateway.assembly.memory_blocks import (
    CANDIDATES_KEY,
    FACTS_KEY,
    STATE_KEY,
    Fact,
    Passage,
    memory_message,
    passage_block,
    recalled_message,
)
from gateway.assembly.message_text import is_system
from gateway.assembly.pass_policy import PassPolicy
from gateway.assembly.verify_assembly import is_gateway_block

PASS = "recall_memory"
DEFAULT_RECALL_BUDGET_TOKENS = 800
DEFAULT_PROFILE_BUDGET_TOKENS = 300


class MemoryPolicy(PassPolicy):
    """``policy.memory``: episodic recall and long-term facts (docs/memory.md).

    Recall is on by default: it archives only what compaction replaced, for the session that
    said it, which the request store already keeps (and ``store.retention_days`` prunes both).
    Long-term facts carry what a user said into other sessions, so they stay opt-in."""

    enabled: bool = True
    recall: bool = True
    recall_budget_tokens: int = Field(default=DEFAULT_RECALL_BUDGET_TOKENS, ge=0)
    max_passages: int = Field(default=3, ge=0)
    min_score: float = Field(default=0.2, ge=0, le=1)
    mode: Literal["inline", "tool"] = "inline"
    passage_tokens: int = Field(default=300, gt=0)  # archived excerpts are cut to about this size
    scope: Literal["session", "owner"] = "session"  # recall from this conversation, or all of the owner's
    long_term: bool = False  # opt-in: facts follow the user into later sessions
    profile_budget_tokens: int = Field(default=DEFAULT_PROFILE_BUDGET_TOKENS, ge=0)
    max_facts: int = Field(default=50, ge=1)
    extract_with: Literal["rules", "summarizer"] = "rules"  # summarizer: policy.compaction.summarizer_model

    @field_validator("mode")
    @classmethod
    def _inline_only(cls, mode: str) -> str:
        if mode != "inline":
            raise ValueError(
                f"mode {mode!r} is not available yet: the gateway-served `recall` tool is not built; use 'inline'"
            )
        return mode


def _memory_state(state: SessionState) -> Mapping[str, Any]:
    found = state.extra.get(STATE_KEY)
    return found if isinstance(found, Mapping) else {}


def _question_index(messages: Sequence[Message]) -> int:
    for i in range(len(messages) - 1, -1, -1):
        if messages[i].get("role") == "user" and not is_gateway_block(messages[i]):
            return i
    return -1


def _profile_index(messages: Sequence[Message]) -> int:
    i = 0
    while i < len(messages) and is_system(messages[i]):
        i += 1
    return i


def _profile(ctx: Context, policy: MemoryPolicy) -> tuple[str | None, list[Decision], bool]:
    """The profile block to send (None: none), its decisions, and whether it was frozen this turn."""
    frozen = _memory_state(ctx.session).get("profile")
    if isinstance(frozen, str):
        return frozen or None, [], False
    if not policy.long_term:
        return None, [], False
    facts: Sequence[Fact] = ctx.annotations.get(FACTS_KEY) or () if ctx.session.turn == 0 else ()
    kept: list[Fact] = []
    for fact in facts[: policy.max_facts]:
        if ctx.env.counter.message(memory_message([*kept, fact])) > policy.profile_budget_tokens:
            break
        kept.append(fact)
    if not kept:
        return "", [], True
    text = str(memory_message(kept)["content"])
    tokens = ctx.env.counter.message(memory_message(kept))
    decision = Decision(
        PASS,
        "remembered",
        tokens_after=tokens,
        reason=f"{len(kept)} fact(s) from earlier sessions placed after the system prompt, frozen for this session",
        detail={"facts": [f.slot for f in kept], "omitted": len(facts) - len(kept), "reused": False},
    )
    return text, [decision], True


def _visible_text(messages: Sequence[Message]) -> str:
    """What the model sees, rendered the way passages were archived (``speaker: text`` lines)."""
    # Imported here: gateway.summarize imports the config, which imports this module's policy.
    from gateway.summarize.transcript import render_transcript

    return render_transcript(messages)


def _select(ctx: Context, policy: MemoryPolicy) -> tuple[list[Passage], list[Decision]]:
    """The passages to recall, best first, and one ``recalled`` decision each."""
    candidates: Sequence[Passage] = ctx.annotations.get(CANDIDATES_KEY) or ()
    if not policy.recall or policy.mode != "inline" or not candidates:
        return [], []
    visible = _visible_text(ctx.messages)
    chosen: list[Passage] = []
    decisions: list[Decision] = []
    used = ctx.env.counter.message(recalled_message([]))
    for p in sorted(candidates, key=lambda c: (-c.score, c.start, c.passage_id)):
        if len(chosen) >= policy.max_passages or p.score < policy.min_score:
            break
        if p.text in visible or any(c.passage_id == p.passage_id for c in chosen):
            continue  # the model still sees it verbatim
        tokens = ctx.env.counter.text(passage_block(p)) + 1
        if used + tokens > policy.recall_budget_tokens:
            continue
        used += tokens
        chosen.append(p)
        decisions.append(
            Decision(
                PASS,
                "recalled",
                tokens_after=tokens,
                reason=f"archived turn(s) {p.turns} match the question (score {p.score:.2f})",
                detail={"score": round(p.score, 4), "turns": p.turns, "start": p.start, "end": p.end, "tokens": tokens},
            )
        )
    return chosen, decisions


def recall_memory(ctx: Context, policy: MemoryPolicy) -> tuple[Context, list[Decision]]:
    """Insert the frozen ``<memory>`` block after the system prompt and append a ``<recalled>`` block at the end."""
    if not (ctx.annotations.get(CANDIDATES_KEY) or policy.long_term or STATE_KEY in ctx.session.extra):
        return ctx, []  # nothing to place or to freeze (most turns): decided before scanning the history
    question = _question_index(ctx.messages)
    if question < 0:
        return ctx, []
    profile, decisions, froze = _profile(ctx, policy)
    passages, recalls = _select(ctx, policy)
    messages = list(ctx.messages)
    if passages:
        messages.append(recalled_message(passages))
    keep = profile or ""
    placed = (
        [c for m in ctx.messages if isinstance(c := m.get("content"), str) and c.startswith("<memory")]
        if profile or froze
        else []
    )
    if placed:  # the pipeline run on its own output: the block is already in place; freeze that one
        profile, decisions, keep = None, [], placed[0]
    if profile:
        messages.insert(_profile_index(messages), {"role": "system", "content": profile})
    session = ctx.session
    if froze:
        memory = {**_memory_state(session), "profile": keep}
        session = replace(session, extra={**session.extra, STATE_KEY: memory})
    if not profile and not passages and not froze:
        return ctx, []
    if profile and not decisions:
        decisions = [
            Decision(
                PASS,
                "remembered",
                tokens_after=ctx.env.counter.message({"role": "system", "content": profile}),
                reason="the session's frozen memory block, sent again byte for byte",
                detail={"reused": True},
            )
        ]
    changed = tuple(messages) if (profile or passages) else ctx.messages
    return ctx.replace(messages=changed, session=session), [*decisions, *recalls]
