"""Recall's block keeps its bounds: the budget for every budget, and the room the window leaves.

(The cut of a passage over the budget to its matching sentences was reverted: on rhelm's held-out half
it let cut neighbour pieces take the places of answers ranked 2nd-3rd.)
"""

from __future__ import annotations

from typing import Any

from gateway.assembly.memory_blocks import CANDIDATES_KEY, Passage
from gateway.assembly.recall_memory import MemoryPolicy, recall_memory
from gateway.assembly.select_passages import select_passages
from tests.assembly.make_context import make_context

FILLER = "We talked about the weather and the long week at school, nothing else of note. "
QUESTION = "Which cloud platforms did you name for getting my files back if my laptop died?"


def _passage(pid: int, start: int, text: str, score: float) -> Passage:
    return Passage(pid, "s", start, start + 2, start // 2 + 1, start // 2 + 1, text, score)


def _candidates() -> tuple[Passage, ...]:
    answer = "assistant: " + FILLER * 6 + "Files come back from cloud platforms: OneDrive, Google Drive, Dropbox. "
    return (
        _passage(1, 10, "user: " + FILLER * 14, 0.48),
        _passage(2, 10, "user: " + FILLER * 13 + "Laptop.", 0.30),  # the same turn's second piece: a neighbour
        _passage(3, 40, answer + FILLER * 8, 0.40),
    )


def _messages() -> list[dict[str, Any]]:
    return [
        {"role": "user", "content": "Hi"},
        {"role": "assistant", "content": "Hello"},
        {"role": "user", "content": QUESTION},
    ]


def test_the_block_keeps_the_budget() -> None:
    ctx = make_context({"messages": _messages()})
    for budget in range(0, 1000, 37):
        chosen = select_passages(_candidates(), _messages(), MemoryPolicy(recall_budget_tokens=budget), ctx.env.counter)
        assert sum(c.tokens for c in chosen) <= budget
        assert all(c.passage.text for c in chosen)


def test_the_block_is_sized_to_the_room_the_window_leaves() -> None:
    """bfcl's finance chat (window a quarter of it): the 800-token block did not fit beside the compacted
    history, the plan reverted to the stage before recall, and 9 of 22 answers ranked first were not sent."""
    probe = make_context({"messages": _messages()})
    window = probe.prompt_tokens() + 400
    ctx = make_context({"messages": _messages()}, context_window=window).annotate(**{CANDIDATES_KEY: _candidates()})
    out, decisions = recall_memory(ctx, MemoryPolicy(recall_budget_tokens=800))
    assert decisions and str(out.messages[-2]["content"]).startswith("<recalled")
    assert out.prompt_tokens() <= window
