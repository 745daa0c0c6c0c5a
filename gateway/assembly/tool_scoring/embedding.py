"""Semantic tool scoring: cosine similarity of MiniLM sentence embeddings, computed offline.

Tool texts repeat turn after turn, so their vectors are memoised per text; a request
then costs one query embedding (a few ms on one core) plus a dot product.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence

import numpy as np

from gateway.assembly.tool_scoring.minilm import load_minilm

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
