"""Semantic tool scoring: cosine similarity of MiniLM sentence embeddings, computed offline.

Tool texts repeat turn after turn, so their vectors are memoised per text; a request
then costs one query embedding (a few ms on one core) plus a dot product.

``score_embedding_sentences`` also embeds each sentence of the turn and scores a tool by
the mean of its similarity to the whole turn and to the sentence it fits best, so a turn
that asks for two things keeps the tools for both (MetaTool-47 recall 0.959 -> 0.970 at 16
tools; see benchmarks/RESULTS.md). The even mix of the two was chosen on a tuning split.

``score_with_profiles`` adds what users said before the model called each tool (the tool's
usage profile, ``usage_profiles``), scored the same way as the description and mixed in.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Sequence

import numpy as np

from gateway.assembly.tool_scoring.minilm import load_minilm
from gateway.assembly.tool_scoring.sentences import split_sentences

#: Weight of the best-matching sentence against the whole turn (tuned on MetaTool-47's tuning split).
SENTENCE_WEIGHT = 0.5
_CACHE_LIMIT = 50_000
_vectors: dict[str, np.ndarray] = {}
_lock = threading.Lock()
#: Recent whole-turn vectors, so the finishing edge can learn a usage profile without re-encoding.
_QUERY_MEMO_LIMIT = 1_024
_queries: OrderedDict[str, np.ndarray] = OrderedDict()


def _document_vectors(documents: Sequence[str]) -> np.ndarray:
    """Each document's vector, encoding only those not remembered.

    The remembered vectors are taken before anything is encoded: adding the new ones may clear
    the cache (here or in another thread), and a document found before must not be looked up again.
    """
    with _lock:
        known = {d: _vectors[d] for d in documents if d in _vectors}
    missing = list(dict.fromkeys(d for d in documents if d not in known))
    if missing:
        encoded = load_minilm().encode(missing)
        with _lock:
            if len(_vectors) + len(missing) > _CACHE_LIMIT:
                _vectors.clear()
            _vectors.update(zip(missing, encoded, strict=True))
        known.update(zip(missing, encoded, strict=True))
    return np.stack([known[d] for d in documents])


def query_vector(query: str) -> np.ndarray:
    """The whole turn's unit vector, encoded now and remembered for a while, so the finishing edge
    can learn a usage profile from it without encoding the turn again (the scorer itself always
    encodes: a repeated turn costs what a new one does)."""
    vector: np.ndarray = load_minilm().encode([query])[0]
    vector.flags.writeable = False
    with _lock:
        _queries[query] = vector
        _queries.move_to_end(query)
        while len(_queries) > _QUERY_MEMO_LIMIT:
            _queries.popitem(last=False)
    return vector


def remembered_query_vector(query: str) -> np.ndarray | None:
    """The memoised vector of ``query``, or None (never encodes: safe on the event loop)."""
    with _lock:
        return _queries.get(query)


def score_embedding(query: str, documents: Sequence[str]) -> list[float]:
    """Cosine similarity between the query and each document (all vectors are unit length)."""
    if not documents or not query.strip():
        return [0.0] * len(documents)
    return [float(s) for s in _document_vectors(documents) @ query_vector(query)]


def score_embedding_sentences(query: str, documents: Sequence[str]) -> list[float]:
    """Mean of each document's cosine to the whole query and to the query sentence it fits best.

    A one-sentence query scores exactly as ``score_embedding``. The sentences are encoded
    in a second batch, apart from the whole query, so they are padded to the longest
    sentence rather than to the whole query.
    """
    if not documents or not query.strip():
        return [0.0] * len(documents)
    return [float(s) for s in _match(query, _document_vectors(documents), sentences=True)]


def score_with_profiles(
    query: str,
    documents: Sequence[str],
    profiles: Sequence[np.ndarray | None],
    weight: float,
    *,
    sentences: bool,
) -> list[float]:
    """Description score mixed with the usage-profile score, for the tools that have a profile.

    A tool with a profile scores ``(1 - weight) * description + weight * profile``, both measured
    the same way (the whole turn, and with ``sentences`` its best sentence, 0.5 each); a tool with
    no profile yet keeps its description score. ``weight`` 0 is the plain scorer.
    """
    if not documents or not query.strip():
        return [0.0] * len(documents)
    have = [i for i, p in enumerate(profiles) if p is not None]
    if weight <= 0 or not have:
        return [float(s) for s in _match(query, _document_vectors(documents), sentences=sentences)]
    vectors = _document_vectors(documents)
    rows = [p for p in profiles if p is not None]
    stacked = np.vstack([vectors, np.stack(rows).astype(vectors.dtype, copy=False)])
    both = _match(query, stacked, sentences=sentences)
    scores = both[: len(documents)].copy()
    scores[have] = (1 - weight) * scores[have] + weight * both[len(documents) :]
    return [float(s) for s in scores]


def _match(query: str, vectors: np.ndarray, *, sentences: bool) -> np.ndarray:
    """Each vector's cosine to the whole turn, mixed with its best sentence when ``sentences``."""
    scores: np.ndarray = vectors @ query_vector(query)
    parts = split_sentences(query) if sentences else []
    if len(parts) > 1:
        best = (vectors @ load_minilm().encode(parts).T).max(axis=1)
        scores = (1 - SENTENCE_WEIGHT) * scores + SENTENCE_WEIGHT * best
    return scores
