"""Choose which archived passages to give back: one rule for inline recall and the recall tool.

Inline recall (``recall_memory``) and the gateway-served recall tool (``edges/recall_tool.py``)
must give the model the same thing for the same question, so both call this: candidates at
or above ``min_score`` whose text the model does not already see verbatim, best first, at
most ``max_passages``, within ``recall_budget_tokens`` for the whole ``<recalled>`` block.
An answer is often spread over two turns (the question's words in one, the answer in the
next), so a chosen passage brings its adjacent turn along when that one scores at least
``NEIGHBOUR_SHARE`` of it (and ``min_score``): the better of its two neighbours only, whole,
in the places and the budget left once the matches are placed (a neighbour that matches well
on its own is a match itself). ``max_passages`` counts turns: the pieces of one long turn take one place.

Matches are ordered by how well each matches on its own (``Passage.match``), not by the score
that includes a share of its neighbour's (``memory/rank.py``): with that share, the turns either
side of a top turn on the question's subject outranked a distinct match, took the places as
matches or as the top turn's neighbour, and the answer's turn was left out (rhelm held-out
"dental treats", session 38: the answer's turn third by meaning, seventh by the shared score).
Candidates still qualify by ``score >= min_score``, the calibrated threshold.

Distinct matches come before more of a turn already given back: the other pieces of a chosen
turn only fill what the budget leaves once every place is decided. Taken right after their
first piece (as neighbours were), a top turn's second piece and its next turn filled the 800
tokens ahead of an answer ranked 2nd-3rd elsewhere ("dental treats", "Aisha Rahman and Pieter"
on rhelm's held-out half). A passage chosen on its own score that would overflow the budget is
cut, when at least ``MIN_TRIM_TOKENS`` remain, to the run of its sentences sharing most words with
the question that fits; a neighbour or a further piece comes only whole. Pure.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from gateway.assembly.context import Message
from gateway.assembly.memory_blocks import Passage, passage_block, recalled_message
from gateway.assembly.message_text import text_of
from gateway.assembly.text_relevance import sentences, terms
from gateway.assembly.verify_assembly import last_client_user

if TYPE_CHECKING:
    from gateway.assembly.recall_memory import MemoryPolicy
    from gateway.tokens import TokenCounter


#: A neighbour comes along when it scores at least this share of the passage it is next to.
NEIGHBOUR_SHARE = 0.6
#: Tokens a passage adds to the block's head (its turns in the note).
HEAD_SHARE_TOKENS = 4
#: Room left in the budget below which a passage that does not fit is skipped rather than cut.
MIN_TRIM_TOKENS = 60
_CUT = "…"


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
    from gateway.summarize.transcript import transcript_text

    return transcript_text(messages)


def select_passages(
    candidates: Sequence[Passage], messages: Sequence[Message], policy: MemoryPolicy, counter: TokenCounter
) -> list[Chosen]:
    """The passages to give back for ``messages``' question, best first (empty when none qualify)."""
    if not candidates:
        return []
    rendered: list[str] = []  # what the model sees, rendered once the first passage gets that far

    def sees(text: str) -> bool:
        if not rendered:
            rendered.append(visible_text(messages))
        return text in rendered[0]

    question = last_client_user(messages)
    asked = set(terms(text_of(messages[question].get("content")))) if question >= 0 else set()
    chosen: list[Chosen] = []
    taken: set[int] = set()
    turns: set[tuple[str, int]] = set()  # the turns given back: one place in max_passages each
    used = _frame_tokens(counter)

    def take(p: Passage, cut: bool) -> bool:
        nonlocal used
        if p.passage_id in taken:
            return False  # already chosen
        if _turn(p) not in turns and len(turns) >= policy.max_passages:
            return False  # no place left for another turn: known before scanning the rendered history
        if sees(p.text):  # ~12 us at a 100 KB rendering; most candidates of a resent 105K turn are seen
            return False  # the model still sees it verbatim
        tokens = counter.text(passage_block(p)) + 1 + HEAD_SHARE_TOKENS
        room = policy.recall_budget_tokens - used
        if tokens > room:
            if not cut or room < MIN_TRIM_TOKENS:
                return False
            p = trimmed(p, asked, room - (tokens - counter.text(p.text)), counter)
            tokens = counter.text(passage_block(p)) + 1 + HEAD_SHARE_TOKENS
            if not p.text or tokens > room:
                return False
        used += tokens
        taken.add(p.passage_id)
        turns.add(_turn(p))
        chosen.append(Chosen(p, tokens))
        return True

    eligible = [p for p in candidates if p.score >= policy.min_score]
    placed: list[Passage] = []
    for p in sorted(eligible, key=lambda c: (-c.match, c.start, c.passage_id)):
        if _turn(p) not in turns and take(p, cut=True):
            placed.append(p)  # more of a turn already given back waits until every place is decided
    for p in placed:  # then one neighbour per match, whole, in the places and the budget left
        floor = max(policy.min_score, NEIGHBOUR_SHARE * p.score)
        for q in sorted(_neighbours(p, candidates), key=lambda c: -c.score):
            if q.score >= floor and _turn(q) not in turns and take(q, cut=False):
                break
    for p in sorted(eligible, key=lambda c: (-c.score, c.start, c.passage_id)):  # then more of the turns given back
        if _turn(p) in turns:
            take(p, cut=False)
    return chosen


def _frame_tokens(counter: TokenCounter) -> int:
    """The tokens of the ``<recalled>`` block with no passage in it: its frame, the same every turn."""
    found = _FRAMES.get(counter.encoding_name)
    if found is None:
        found = _FRAMES[counter.encoding_name] = counter.message(recalled_message([]))
    return found


#: Encoding name -> ``_frame_tokens``: the frame's text is a constant.
_FRAMES: dict[str, int] = {}


def _turn(p: Passage) -> tuple[str, int]:
    """The turn a passage is a piece of (a long turn is archived as several pieces with one start)."""
    return (p.session_id, p.start)


def _neighbours(p: Passage, candidates: Sequence[Passage]) -> list[Passage]:
    """The candidates holding the turn just before or just after ``p``."""
    return [
        q
        for q in candidates
        if q.passage_id != p.passage_id and q.session_id == p.session_id and (q.end == p.start or q.start == p.end)
    ]


def trimmed(p: Passage, asked: set[str], budget: int, counter: TokenCounter) -> Passage:
    """``p`` cut to the run of whole sentences sharing most words with the question (``asked``) that
    fits in ``budget`` tokens, an ellipsis marking each cut (empty text when not even one sentence fits)."""
    parts = sentences(p.text)
    costs = [counter.text(s) for s in parts]
    hits = [len(asked & set(terms(s))) for s in parts]
    room = budget - 2 * counter.text(_CUT)
    best: tuple[int, int, int] = (-1, 0, 0)  # (shared words, start, end)
    for a in range(len(parts)):
        spent, shared = 0, 0
        for b in range(a, len(parts)):
            spent += costs[b]
            if spent > room:
                break
            shared += hits[b]
            if shared > best[0] or (shared == best[0] and b + 1 - a > best[2] - best[1]):
                best = (shared, a, b + 1)
    _, a, b = best
    if b <= a:
        return replace(p, text="")
    text = "".join(parts[a:b]).strip()
    return replace(p, text=f"{_CUT if a else ''}{text}{_CUT if b < len(parts) else ''}")
