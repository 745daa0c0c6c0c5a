"""Well-formed ``logprobs`` for a simulated answer: one entry per real token, deterministic values."""

from __future__ import annotations

import hashlib
from typing import Any

import tiktoken

_ALTERNATIVES = (" the", " a", ",", ".", " and", " of", " to", " in", " is", " it", "\n", " that", " for", " on")


def _logprob(token: str, position: int, rank: int) -> float:
    digest = hashlib.sha256(f"{position}:{token}".encode()).digest()
    base = -(digest[0] / 255) * 0.5  # the chosen token is likely: between -0.5 and 0
    return round(base - rank * (1.0 + digest[1] / 255), 6)


def token_pieces(text: str, encoding: str) -> list[str]:
    """``text`` cut at the tokenizer's token boundaries (pieces join back to ``text``)."""
    enc = tiktoken.get_encoding(encoding)
    pieces: list[str] = []
    for token in enc.encode(text, disallowed_special=()):
        pieces.append(enc.decode_single_token_bytes(token).decode("utf-8", errors="replace"))
    return pieces if "".join(pieces) == text else [text] if text else []


def entries(pieces: list[str], top: int, offset: int = 0) -> list[dict[str, Any]]:
    """The ``logprobs.content`` entries for these token pieces, with ``top`` alternatives each."""
    out = []
    for i, piece in enumerate(pieces, start=offset):
        chosen = _logprob(piece, i, 0)
        alternatives = [a for a in _ALTERNATIVES if a != piece][: max(0, top - 1)]
        tops = [{"token": piece, "logprob": chosen, "bytes": list(piece.encode())}] if top else []
        tops += [
            {"token": a, "logprob": _logprob(a, i, r + 1), "bytes": list(a.encode())}
            for r, a in enumerate(alternatives)
        ]
        out.append({"token": piece, "logprob": chosen, "bytes": list(piece.encode()), "top_logprobs": tops})
    return out
