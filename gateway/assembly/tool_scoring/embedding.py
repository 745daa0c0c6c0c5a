"""Semantic tool scoring: cosine similarity of MiniLM sentence embeddings, computed offline.

Tool texts repeat turn after turn, so their vectors are memoised per text; a request
then costs one query embedding (a few ms on one core) plus a dot product.

``score_embedding_sentences`` also embeds each sentence of the turn and scores a tool by
the mean of its similarity to the whole turn and to the sentence it fits best, so a turn
that asks for two things keeps the tools for both (MetaTool-47 recall 0.959 -> 0.970 at 16
tools; see benchmarks/RESULTS.md). The even mix of the two was chosen on a tuning split.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence

import numpy as np

from gateway.assembly.tool_scoring.minilm import load_minilm
from gateway.assembly.tool_scoring.sentences import split_sentences

#: Weight of the best-matching sentence against the whole turn (tuned on MetaTool-47's tuning split).
SENTENCE_WEIGHT = 0.5
_CACHE_LIMIT = 50_000
_vectors: dict[str, np.ndarray] = {}
_lock = threading.Lock()


def _document_vectors(documents: Sequence[str]) -> np.ndarray:
    missing = list(dict.fromkeys(d for d in documents if d not in _vectors))
    if missing:
        encoded = load_minilm().encode(missing)
        with _lock:
            if len(_vectors) + len(missing) > _CACHE_LIMIT:
                _vectors.clear()
            _vectors.update(zip(missing, encoded, strict=True))
        found = dict(zip(missing, encoded, strict=True))  # in case another thread cleared the cache
        return np.stack([found[d] if d in found else _vectors[d] for d in documents])
    return np.stack([_vectors[d] for d in documents])


def score_embedding(query: str, documents: Sequence[str]) -> list[float]:
    """Cosine similarity between the query and each document (all vectors are unit length)."""
    if not documents or not query.strip():
        return [0.0] * len(documents)
    query_vector = load_minilm().encode([query])[0]
    return [float(s) for s in _document_vectors(documents) @ query_vector]


def score_embedding_sentences(query: str, documents: Sequence[str]) -> list[float]:
    """Mean of each document's cosine to the whole query and to the query sentence it fits best.

    A one-sentence query scores exactly as ``score_embedding``. The sentences are encoded
    in a second batch, apart from the whole query, so they are padded to the longest
    sentence rather than to the whole query.
    """
    if not documents or not query.strip():
        return [0.0] * len(documents)
    model = load_minilm()
    vectors = _document_vectors(documents)
    scores = vectors @ model.encode([query])[0]
    sentences = split_sentences(query)
    if len(sentences) > 1:
        best = (vectors @ model.encode(sentences).T).max(axis=1)
        scores = (1 - SENTENCE_WEIGHT) * scores + SENTENCE_WEIGHT * best
    return [float(s) for s in scores]
