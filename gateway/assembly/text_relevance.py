"""Lexical relevance of text to a question: BM25 scores on a 0-1 scale, near-duplicates, windows.

The documents pass and the oversize pass both need to answer "how much does this passage
speak to the question?" without a network call, so both use BM25 (``rank_bm25``) over
word terms. Raw BM25 is unbounded and depends on the corpus, which makes a threshold
meaningless, so scores are divided by a reference: the score an average-length passage
would get if it mentioned every question term exactly once. 1.0 therefore reads "covers
the whole question", 0.5 "covers about half of it (weighted by how rare each word is)".
Question terms that no passage contains count fully against every passage.

Passages are cut into windows on sentence and line boundaries, never mid-word, so an
excerpt quoted to the model is text the client actually sent.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Sequence

from rank_bm25 import BM25Okapi

#: Words that carry no topic in English or Spanish questions; a small fixed list keeps scores reproducible.
_STOPWORD_TEXT = (
    "a an and are as at be by do does for from has have how i in is it its me my of on or our "
    "please that the their this to today was we what when where which who why will with you your "
    "el la los las un una unos unas de del en que qué es son por para con al se lo su sus hoy "
    "cuál cuáles cómo dónde cuándo quién me mi"
)
STOPWORDS = frozenset(_STOPWORD_TEXT.split(" "))
_TERM = re.compile(r"\w+(?:[.,:/-]\w+)*")
_SENTENCE = re.compile(r"[.!?;]\s+|\n+")  # no look-behind: twice as fast on a 1 MB paste

_LOOKUP_WORDS = (
    "what",
    "which",
    "where",
    "when",
    "who",
    "how much",
    "how many",
    "find",
    "look up",
    "quote",
    "clause",
    "section",
    "article",
    "qué",
    "cuál",
    "dónde",
    "cuándo",
    "quién",
    "cuánto",
    "buscar",
    "busca",
    "encuentra",
    "encontrar",
    "extrae",
    "cláusula",
)
_SUMMARY_WORDS = ("summar", "resum", "overview", "tl;dr", "sintetiza", "síntesis", "gist")


def terms(text: str) -> list[str]:
    """Lower-cased word terms without stopwords; ``14.3`` and ``18,499`` stay one term."""
    return [t for t in _TERM.findall(text.lower()) if t not in STOPWORDS]


def relevance_scores(question: str, passages: Sequence[str]) -> list[float]:
    """Score each passage against the question on a 0-1 scale (see the module docstring)."""
    return term_scores(terms(question), [terms(p) for p in passages])


def term_scores(question_terms: Sequence[str], corpus: Sequence[Sequence[str]]) -> list[float]:
    """``relevance_scores`` over passages already cut into terms (e.g. an index stored with them)."""
    query = list(dict.fromkeys(question_terms))
    if not corpus:
        return []
    if not query:
        return [0.0] * len(corpus)
    bm25 = _SmoothedBM25([list(c) or ["\x00"] for c in corpus])
    absent = max(bm25.idf.values(), default=1.0)
    reference = sum(bm25.idf.get(t, absent) for t in query)
    raw = bm25.get_scores(query)
    return [max(0.0, min(1.0, float(s) / reference)) if reference > 0 else 0.0 for s in raw]


class _SmoothedBM25(BM25Okapi):  # type: ignore[misc]
    """BM25 with Lucene's IDF, ``log(1 + (N - n + 0.5) / (n + 0.5))``: never negative, even among three passages.

    rank_bm25's Okapi IDF goes negative for a term in more than half the passages and is
    then floored to a corpus-wide average, which makes a five-document request's scores
    swing with unrelated words; the smoothed form keeps common question words worth a little.
    """

    def _calc_idf(self, nd: dict[str, int]) -> None:
        self.idf = {t: math.log(1 + (self.corpus_size - n + 0.5) / (n + 0.5)) for t, n in nd.items()}


def shingles(text: str, size: int = 3) -> frozenset[int]:
    """The set of (hashed) word ``size``-grams of a text (all its words when it is shorter)."""
    words = _TERM.findall(text.lower())
    if len(words) <= size:
        return frozenset({hash(" ".join(words))}) if words else frozenset()
    return frozenset(hash(" ".join(words[i : i + size])) for i in range(len(words) - size + 1))


def similarity(a: frozenset[int], b: frozenset[int], floor: float = 0.0) -> float:
    """Jaccard similarity of two shingle sets: 1.0 identical wording, 0.0 nothing shared.

    Jaccard is at most ``min(|a|, |b|) / max(|a|, |b|)``; when that bound is not above
    ``floor`` the sets are not intersected and the bound is returned (the caller only
    asks whether the similarity exceeds ``floor``).
    """
    if not a and not b:
        return 1.0
    bound = min(len(a), len(b)) / max(len(a), len(b))
    if bound <= floor:
        return bound
    inter = len(a & b)
    return inter / (len(a) + len(b) - inter)


def is_lookup(question: str) -> bool:
    """Whether a question asks for a specific fact (lookup) rather than a summary of everything."""
    lowered = question.lower()
    if any(w in lowered for w in _SUMMARY_WORDS):
        return False
    return "?" in lowered or any(re.search(rf"\b{re.escape(w)}\b", lowered) for w in _LOOKUP_WORDS)


def sentences(text: str) -> list[str]:
    """Split text into pieces that end at a sentence or line boundary; joining them gives the text back."""
    pieces: list[str] = []
    start = 0
    for match in _SENTENCE.finditer(text):
        pieces.append(text[start : match.end()])
        start = match.end()
    if start < len(text):
        pieces.append(text[start:])
    return pieces


def windows(text: str, size: int, overlap: int, count: Callable[[str], int]) -> list[str]:
    """Cut text into windows of about ``size`` tokens that repeat the last ``overlap`` tokens.

    Windows end on sentence or line boundaries; a sentence longer than a window is cut
    between words. ``count`` is the model's token counter for one string.
    """
    units = split_units(text, size, count)
    return ["".join(u for u, _ in units[a:b]) for a, b in window_spans([n for _, n in units], size, overlap)]


def split_units(text: str, size: int, count: Callable[[str], int]) -> list[tuple[str, int]]:
    """Sentences (long ones cut between words to at most about ``size`` tokens) with their token counts."""
    return [(u, count(u)) for piece in sentences(text) for u in _split_long(piece, size, count)]


def edges(text: str, edge: int, count: Callable[[str], int]) -> tuple[str, str, str]:
    """Split off about ``edge`` tokens at each end on sentence boundaries: (head, middle, tail).

    The shape both condensers keep (``shrink_oversize`` for results, ``condense_reasoning`` for an
    assistant's reasoning): where a text starts and where it concludes."""
    units = split_units(text, max(edge, 1), count)
    a, spent = 0, 0
    while a < len(units) and spent + units[a][1] <= edge:
        spent += units[a][1]
        a += 1
    b, spent = len(units), 0
    while b > a and spent + units[b - 1][1] <= edge:
        spent += units[b - 1][1]
        b -= 1
    join = "".join
    return join(u for u, _ in units[:a]), join(u for u, _ in units[a:b]), join(u for u, _ in units[b:])


def window_spans(counts: Sequence[int], size: int, overlap: int) -> list[tuple[int, int]]:
    """Unit ranges ``[start, end)`` of about ``size`` tokens each, consecutive ones sharing ``overlap`` tokens."""
    spans: list[tuple[int, int]] = []
    start, filled = 0, 0
    for i, n in enumerate(counts):
        if i > start and filled + n > size:
            spans.append((start, i))
            start, filled = i, 0
            while start > spans[-1][0] + 1 and filled + counts[start - 1] <= overlap:
                start -= 1
                filled += counts[start]
        filled += n
    if start < len(counts):
        spans.append((start, len(counts)))
    return spans


def _split_long(piece: str, size: int, count: Callable[[str], int]) -> list[str]:
    """Cut a piece longer than ``size`` tokens between words (roughly ``size`` tokens each)."""
    n = count(piece)
    if n <= size:
        return [piece]
    words = re.split(r"(?<=\s)", piece)
    per = max(1, math.floor(len(words) * size / n))
    return ["".join(words[i : i + per]) for i in range(0, len(words), per)]
