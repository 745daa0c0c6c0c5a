"""Find the facts and preferences a user states about themselves, by rules.

Each rule reads one sentence of a user message and yields a ``Fact`` whose ``slot`` says
what the fact is about. One fact per slot is stored per user, so a later statement on the
same slot replaces the earlier one ("the project uses PostgreSQL 16", later "... uses
PostgreSQL 17": slot ``uses:postgresql``), and restating a fact changes nothing.

The rules are deliberately narrow (first person, present tense): a wrong fact placed at
the start of every later session costs more than a missed one. Questions are skipped.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable

from gateway.assembly.memory_blocks import Fact

_SENTENCE = re.compile(r"(?<=[.!;\n])\s+|\n+")
_WORDS = r"[\w+#.'/-]+(?: [\w+#.'/-]+){0,5}"
_NAME = r"[A-Z][\w'-]+(?: [A-Z][\w'-]+)?"
MAX_FACT_CHARS = 160


def _clean(value: str) -> str:
    return value.strip().rstrip(".,;:!)").strip()


def _slug(value: str) -> str:
    words = re.findall(r"[a-z][a-z+#]*", value.lower())
    return words[0] if words else "thing"


Rule = tuple[re.Pattern[str], Callable[[re.Match[str]], Fact | None]]

_RULES: tuple[Rule, ...] = (
    (re.compile(rf"\b[Mm]y name is ({_NAME})"), lambda m: Fact("name", f"Their name is {_clean(m[1])}.")),
    (
        re.compile(r"\bI(?:'m| am) (\d{1,3}) years old", re.I),
        lambda m: Fact("age", f"They are {m[1]} years old (when stated)."),
    ),
    (re.compile(rf"\bI (?:currently )?live in ({_NAME})"), lambda m: Fact("home", f"They live in {_clean(m[1])}.")),
    (
        re.compile(rf"\bI (?:currently )?work (as|at|for) ((?:an? |the )?{_WORDS})", re.I),
        lambda m: Fact(f"work:{m[1].lower()}", f"They work {m[1].lower()} {_clean(m[2])}."),
    ),
    (
        re.compile(rf"\bmy (?:absolute )?fav(?:ou?rite) ([\w ]{{1,30}}?) (?:is|are) ({_WORDS})", re.I),
        lambda m: Fact(f"favorite:{_clean(m[1]).lower()}", f"Their favorite {_clean(m[1])} is {_clean(m[2])}."),
    ),
    (
        re.compile(rf"\bI (?:really |strongly |much )?prefer ({_WORDS})", re.I),
        lambda m: Fact("prefers", f"They prefer {_clean(m[1])}."),
    ),
    (
        re.compile(rf"\b(?:the|our|my) (?:project|app|service|team|stack|codebase) uses ({_WORDS})", re.I),
        lambda m: Fact(f"uses:{_slug(m[1])}", f"The project uses {_clean(m[1])}."),
    ),
    (
        re.compile(rf"\bI(?:'m| am) allergic to ({_WORDS})", re.I),
        lambda m: Fact(f"allergy:{_slug(m[1])}", f"They are allergic to {_clean(m[1])}."),
    ),
)


def _sentences(text: str) -> Iterable[str]:
    for piece in _SENTENCE.split(text):
        piece = piece.strip()
        if piece and not piece.endswith("?"):
            yield piece


def extract_facts(texts: Iterable[str]) -> list[Fact]:
    """Facts stated in ``texts`` (user messages, oldest first); the last statement per slot wins."""
    found: dict[str, Fact] = {}
    for text in texts:
        for sentence in _sentences(text):
            for pattern, make in _RULES:
                for match in pattern.finditer(sentence):
                    fact = make(match)
                    if fact is not None and len(fact.text) <= MAX_FACT_CHARS:
                        found.pop(fact.slot, None)
                        found[fact.slot] = fact
    return list(found.values())
