"""Find the facts a summary must keep: numbers, dates, identifiers, URLs, paths, emails, tool names.

A summary is accepted only if it still carries these (literally, as substrings); what it
lost is recorded. Names in prose are not checked here (too ambiguous to match reliably),
but the extractive summariser still prefers sentences that carry them.
"""

from __future__ import annotations

import re
from collections import OrderedDict
from collections.abc import Callable, Iterable, Sequence
from threading import Lock

_URL = r"https?://[^\s<>\"')\]]+"
_EMAIL = r"[\w.+-]+@[\w-]+\.[\w.-]+"
_PATH = (
    r"(?:~|\.{1,2})?/(?:[\w.-]+/)*[\w.-]+|\b[\w-]+(?:/[\w.-]+)+\b"
    r"|\b[\w-]+\.(?:py|js|ts|json|yaml|yml|md|txt|csv|sql|go|rs|toml|cfg|ini|log)\b"
)
_DATE = r"\b\d{4}-\d{2}-\d{2}(?:[T ]\d{2}:\d{2}(?::\d{2})?)?\b|\b\d{1,2}:\d{2}\s?(?:[AaPp][Mm])?\b"
_ID = r"\b(?=[\w-]*\d)(?=[\w-]*[A-Za-z])[A-Za-z0-9][\w-]*[A-Za-z0-9]\b"
_NUMBER = r"(?<![\w.])[-+]?\$?\d[\d,]*(?:\.\d+)?%?"
_FACT = re.compile("|".join(f"(?:{p})" for p in (_URL, _EMAIL, _DATE, _PATH, _ID, _NUMBER)))

_MONTHS = (
    "january|february|march|april|may|june|july|august|september|october|november|december|"
    "jan|feb|mar|apr|jun|jul|aug|sep|sept|oct|nov|dec"
)
#: Dates and times written in words ("January 31st", "3rd of May", "on Tuesday", "7 pm").
PROSE_DATE = re.compile(
    rf"\b\d{{1,2}}[/.]\d{{1,2}}[/.]\d{{2,4}}\b|\b(?:{_MONTHS})\.? \d{{1,2}}(?:st|nd|rd|th)?\b|"
    rf"\b\d{{1,2}}(?:st|nd|rd|th)? (?:of )?(?:{_MONTHS})\b|"
    r"\b(?:monday|tuesday|wednesday|thursday|friday|saturday|sunday)\b|"
    r"\b\d{1,2}(?::\d{2})? ?(?:am|pm)\b",
    re.IGNORECASE,
)
_WEEKDAY = re.compile(r"(?:mon|tues|wednes|thurs|fri|satur|sun)day", re.IGNORECASE)
_DIGIT = re.compile(r"\d")


def prose_dates(text: str) -> list[str]:
    """The dates and times ``text`` writes in words, first seen first (not required of a summary:
    they are how people speak, too varied to check literally, but they rank what a summary keeps).

    Every form but a weekday holds a digit, so text with neither is not scanned (the full pattern
    costs about a millisecond per thousand characters)."""
    if _DIGIT.search(text) is None and _WEEKDAY.search(text) is None:
        return []
    return list(_prose_dates_in(text))


def _scan_prose_dates(text: str) -> tuple[str, ...]:
    return tuple(dict.fromkeys(m.group(0) for m in PROSE_DATE.finditer(text)))


#: Numbers this short carry little (list positions, "1 item"); they are not required to survive.
_MIN_NUMBER_DIGITS = 2


def _keep(token: str) -> bool:
    if token.replace(",", "").replace(".", "").replace("-", "").replace("+", "").isdigit():
        return sum(ch.isdigit() for ch in token) >= _MIN_NUMBER_DIGITS
    return len(token) >= 2


class _Remembered:
    """What a scan found in each text, remembered: a session's messages are scanned again on every turn
    that summarises, clears or checks them (the scans were most of a compacting turn's CPU). Bounded by
    the characters kept, not the entries, since one tool result can be hundreds of kilobytes; assembly
    may run off the event loop in more than one thread, hence the lock."""

    def __init__(self, scan: Callable[[str], tuple[str, ...]], max_chars: int = 8_000_000) -> None:
        self._scan, self._max_chars, self._chars = scan, max_chars, 0
        self._found: OrderedDict[str, tuple[str, ...]] = OrderedDict()
        self._lock = Lock()

    def __call__(self, text: str) -> tuple[str, ...]:
        with self._lock:
            hit = self._found.get(text)
            if hit is not None:
                self._found.move_to_end(text)
                return hit
        found = self._scan(text)
        if len(text) <= self._max_chars // 16:
            with self._lock:
                if text not in self._found:
                    self._found[text] = found
                    self._chars += len(text)
                while self._chars > self._max_chars:
                    self._chars -= len(self._found.popitem(last=False)[0])
        return found


def _scan_facts(text: str) -> tuple[str, ...]:
    found = (m.group(0).strip().rstrip(".,;:") for m in _FACT.finditer(text))
    return tuple(dict.fromkeys(t for t in found if t and _keep(t)))


_facts_in = _Remembered(_scan_facts)
_prose_dates_in = _Remembered(_scan_prose_dates)


def extract_facts(text: str, *, extra: Iterable[str] = ()) -> list[str]:
    """Return the fact tokens in ``text`` (plus ``extra``, e.g. tool names), first seen first."""
    return list(dict.fromkeys([*_facts_in(text), *(e for e in extra if e)]))


def extract_facts_of(texts: Sequence[str], *, extra: Iterable[str] = ()) -> list[str]:
    """``extract_facts("\\n".join(texts))`` without building the joined text: no fact pattern crosses a
    line break, so the facts of the whole are those of each text in turn, and each text's are remembered."""
    return list(dict.fromkeys([*(f for text in texts for f in _facts_in(text)), *(e for e in extra if e)]))


def missing_facts(facts: Iterable[str], summary: str) -> list[str]:
    """The facts that do not appear literally in ``summary``."""
    return [f for f in facts if f not in summary]


def fact_score(text: str) -> int:
    """How many distinct facts a sentence carries (0 for filler)."""
    return len(extract_facts(text))
