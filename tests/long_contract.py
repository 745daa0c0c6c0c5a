"""A long, deterministic supply contract with one clause a question can ask about.

Hundreds of clauses share a vocabulary (penalties, delivery, payment), so finding the one
that answers a question is real lexical retrieval, not a search for a unique word.
"""

from __future__ import annotations

import random

CLAUSE_ID = "14.3"
CLAUSE = (
    "Clause 14.3 (Late delivery penalty): for each full week of delay beyond the agreed delivery date "
    "the Supplier shall pay the Buyer a penalty of 2.5 percent of the order value, capped at 15 percent, "
    "payable within 30 days of the Buyer's written claim."
)
QUESTION = "What late delivery penalty does clause 14.3 set?"

_SUBJECTS = ["The Supplier", "The Buyer", "Either party", "The carrier", "The auditor", "The project manager"]
_VERBS = ["shall notify", "may inspect", "shall invoice", "must insure", "may suspend", "shall document"]
_OBJECTS = [
    "the quarterly inventory report",
    "all packaging materials",
    "the warehouse premises",
    "any change of subcontractor",
    "the calibration certificates",
    "the monthly service levels",
]
_TAILS = [
    "within ten business days",
    "at its own cost",
    "in accordance with Annex B",
    "unless otherwise agreed in writing",
    "before the next billing cycle",
    "subject to clause 2.1",
]


def long_contract(target_tokens: int, *, seed: int = 7) -> str:
    """About ``target_tokens`` tokens of clauses (~25 tokens each on o200k_base), ``CLAUSE`` in the middle."""
    rng = random.Random(seed)
    n = max(10, target_tokens // 25)
    lines = []
    for i in range(n):
        section, item = 1 + i // 9, 1 + i % 9
        if (section, item) == (14, 3):
            continue
        lines.append(
            f"Clause {section}.{item}: {rng.choice(_SUBJECTS)} {rng.choice(_VERBS)} {rng.choice(_OBJECTS)} "
            f"{rng.choice(_TAILS)}; reference {rng.randrange(10_000, 99_999)}."
        )
    lines.insert(len(lines) // 2, CLAUSE)
    return "\n".join(lines)
