"""Choose which archived passages to give back: one rule for inline recall and the recall tool.

Inline recall (``recall_memory``) and the gateway-served recall tool (``api/recall_tool.py``)
must give the model the same thing for the same question, so both call this: candidates at
or above ``min_score`` whose text the model does not already see verbatim, best first, at
most ``max_passages``, within ``recall_budget_tokens`` for the whole ``<recalled>`` block.
Pure.
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
    used = counter.message(recalled_message([]))
    for p in sorted(candidates, key=lambda c: (-c.score, c.start, c.passage_id)):
        if len(chosen) >= policy.max_passages or p.score < policy.min_score:
            break
        if p.text in visible or any(c.passage.passage_id == p.passage_id for c in chosen):
            continue  # the model still sees it verbatim
        tokens = counter.text(passage_block(p)) + 1
        if used + tokens > policy.recall_budget_tokens:
            continue
        used += tokens
        chosen.append(Chosen(p, tokens))
    return chosen
