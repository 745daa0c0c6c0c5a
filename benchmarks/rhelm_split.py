"""The fixed split of ``long_conversations/rhelm.jsonl`` into chats tuned on and chats only measured on.

A conversation belongs to the held-out half when the first byte of the SHA-256 of its ``id`` is
odd, to the tuning half when it is even: deterministic, independent of file order and of any
score, and the same on every machine. Recall's constants (``gateway/memory/rank.py``,
``select_passages``) and the summariser's weights were chosen looking at the tuning half only;
benchmarks/RESULTS.md reports both halves.
"""

from __future__ import annotations

import hashlib
from typing import Any, Literal

Half = Literal["tune", "held-out", "all"]


def half_of(case_id: str) -> Literal["tune", "held-out"]:
    return "held-out" if hashlib.sha256(case_id.encode()).digest()[0] % 2 else "tune"


def in_half(cases: list[dict[str, Any]], half: Half) -> list[dict[str, Any]]:
    return cases if half == "all" else [c for c in cases if half_of(c["id"]) == half]
