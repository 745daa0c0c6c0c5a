"""Lexical tool scoring with BM25Okapi (rank-bm25): fast, deterministic, needs shared words.

Text is lower-cased, split into alphanumeric words (identifiers split first) and common
English function words are dropped, so "Can you get me the weather" matches a tool
``get_weather`` on "weather" rather than on "the".
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Sequence
from functools import lru_cache

import numpy as np
from rank_bm25 import BM25Okapi

from gateway.assembly.tool_scoring.documents import split_identifier

_WORD = re.compile(r"[a-z0-9]+")
_STOPWORDS = frozenset(
    [
        "a",
        "an",
        "and",
        "any",
        "are",
        "as",
        "at",
        "be",
        "by",
        "can",
        "could",
        "do",
        "does",
        "for",
        "from",
        "get",
        "give",
        "how",
        "i",
        "in",
        "is",
        "it",
        "me",
        "my",
        "of",
        "on",
        "or",
        "our",
        "please",
        "should",
        "some",
        "that",
        "the",
        "this",
        "to",
        "us",
        "want",
        "we",
        "what",
        "which",
        "with",
        "would",
        "you",
        "your",
    ]
)


class _LuceneBM25(BM25Okapi):  # type: ignore[misc]  # rank-bm25 ships no type hints
    """BM25Okapi with Lucene's always-positive idf, ``log(1 + (N - n + 0.5) / (n + 0.5))``.

    The classic idf is zero or negative for a word in half the documents or more, which on
    a list of two or three tools would score a perfect match as 0.
    """

    def _calc_idf(self, nd: dict[str, int]) -> None:
        self.idf = {word: math.log(1 + (self.corpus_size - n + 0.5) / (n + 0.5)) for word, n in nd.items()}
        self._term_scores: dict[str, np.ndarray] = {}

    def term_scores(self, term: str) -> np.ndarray:
        """One term's BM25 contribution to every document, computed once per index and term."""
        found = self._term_scores.get(term)
        if found is None:
            found = self._term_scores[term] = self.get_scores([term])
        return found

    def scores(self, terms: Sequence[str]) -> np.ndarray:
        """``get_scores(terms)``, in time proportional to the distinct terms the tools know.

        rank-bm25 walks every document for every query word, repeats included; a query of a
        few hundred words against 50 tools is then ~1 ms. The per-term vectors are the same
        every turn, so they are kept, and each distinct known term is added once, times its count.
        """
        total = np.zeros(self.corpus_size)
        for term, count in Counter(terms).items():
            if term in self.idf:
                total += count * self.term_scores(term)
        return total


def bm25_terms(text: str) -> tuple[str, ...]:
    """Words of ``text`` as BM25 sees them (identifiers split, lower case, stopwords out).

    Memoised line by line (a line break separates words in every step here, so the terms of
    a text are those of its lines in order): a turn's query repeats most of its lines from
    the previous turn, so only new lines are split.
    """
    if "\n" not in text:
        return _line_terms(text)
    return tuple(term for line in text.split("\n") for term in _line_terms(line))


# Process-wide and pure: a function of strings.
@lru_cache(maxsize=20_000)
def _line_terms(text: str) -> tuple[str, ...]:
    return tuple(w for w in _WORD.findall(split_identifier(text).lower()) if w not in _STOPWORDS)


# Process-wide and pure: a function of the documents' strings.
@lru_cache(maxsize=512)
def _index(documents: tuple[str, ...]) -> _LuceneBM25:
    """The BM25 index of one tool list: clients resend the same tools every turn, so it is built once."""
    return _LuceneBM25([list(bm25_terms(d)) or ["\x00"] for d in documents])


def score_bm25(query: str, documents: Sequence[str]) -> list[float]:
    """BM25 score of ``query`` against each document, built over this tool list."""
    terms = bm25_terms(query)
    if not documents or not terms:
        return [0.0] * len(documents)
    return [float(s) for s in _index(tuple(documents)).scores(terms)]
