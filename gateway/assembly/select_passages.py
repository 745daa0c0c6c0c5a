"""Choose which archived passages to give back: one rule for inline recall and the recall tool.

Inline recall (``recall_memory``) and the gateway-served recall tool (``api/recall_tool.py``)
must give the model the same thing for the same question, so both call this: candidates at
or above ``min_score`` whose text the model does not already see verbatim, best first, at
most ``max_passages``, within ``recall_budget_tokens`` for the whole ``<recalled>`` block.
An answer is often spread over two turns (the question's words in one, the answer in the
next), so a chosen passage brings its adjacent turn along, ahead of weaker matches elsewhere,
when that one scores at least ``NEIGHBOUR_SHARE`` of it (and ``min_score``), within the same
bounds. Pure.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from gateway.assembly.context import Message
from gateway.assembly.memory_blocks import Passage, passage_block, recalled_message

if TYPE_CHECKING:
    from gateway.assembly.recall_memory import MemoryPolicy
    from gateway.tokens import TokenCounter


#: A neighbour comes along when it scores at least this share of the passage it is next to.
NEIGHBOUR_SHARE = 0.6
#: Tokens a passage adds to the block's head (its turns in the note).
HEAD_SHARE_TOKENS = 4


@dataclass(frozen=True, slots=True)
class Chosen:
    """A passage to give back and the prompt tokens it adds inside the block."""

    passage: Passage
    tokens: int


def passage_detail(passage: Passage) -> dict[str, Any]:
    """How a decision names a passage given back: its score and the archived turns it holds."""
    return {"score": round(passage.score, 4), "turns": passage.turns, "start": passage.start, "end": passage.end}


def visible_text(messages: Sequence[Message]) -> str:
    """What the model sees, rendered the way passages were archived (``speaker: text`` lines)."""
    # Imported here: gateway.summarize imports the config, which imports the memory policy.
    from gateway.summarize.transcript import render_transcript

    return render_transcript(messages)


def select_passages(
    candidates: Sequence[Passage], messages: Sequence[Message], policy: MemoryPolicy, counter: TokenCounter
) -> list[Chosen]:
    """The passages to give back for ``messages``' question, best first (empty when none qualify)."""
    if not candidates:
        return []
    visible = visible_text(messages)
    chosen: list[Chosen] = []
    taken: set[int] = set()
    used = counter.message(recalled_message([]))

    def take(p: Passage) -> bool:
        nonlocal used
        if p.passage_id in taken or p.text in visible:
            return False  # already chosen, or the model still sees it verbatim
        tokens = counter.text(passage_block(p)) + 1 + HEAD_SHARE_TOKENS
        if used + tokens > policy.recall_budget_tokens:
            return False
        used += tokens
        taken.add(p.passage_id)
        chosen.append(Chosen(p, tokens))
        return True

    for p in sorted(candidates, key=lambda c: (-c.score, c.start, c.passage_id)):
        if len(chosen) >= policy.max_passages or p.score < policy.min_score:
            break
        if not take(p):
            continue
        floor = max(policy.min_score, NEIGHBOUR_SHARE * p.score)
        for q in sorted(_neighbours(p, candidates), key=lambda c: -c.score):
            if len(chosen) < policy.max_passages and q.score >= floor:
                take(q)
    return chosen


def _neighbours(p: Passage, candidates: Sequence[Passage]) -> list[Passage]:
    """The candidates holding the turn just before or just after ``p`` (or another piece of its turn)."""
    return [
        q
        for q in candidates
        if q.passage_id != p.passage_id
        and q.session_id == p.session_id
        and (q.end == p.start or q.start == p.end or q.start == p.start)
    ]
