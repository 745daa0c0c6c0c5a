"""Patterns that recognise per-turn values (timestamps, ids, counters) inside prompt text.

Shared by the volatile-state pass and by session identification: a timestamp in the
system prompt must not make every turn look like a new conversation.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

_MONTHS = r"(?:Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Sept|Oct|Nov|Dec)[a-z]*\.?"
_DAYS = r"(?:Mon|Tue|Wed|Thu|Fri|Sat|Sun)[a-z]*,?"

#: (name, pattern) pairs, most specific first; names appear in decisions.
BUILTIN_PATTERNS: tuple[tuple[str, str], ...] = (
    ("uuid", r"\b[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}\b"),
    (
        "iso_datetime",
        r"\b\d{4}-\d{2}-\d{2}[T ]\d{1,2}:\d{2}(?::\d{2}(?:\.\d+)?)?(?:Z|[+-]\d{2}:?\d{2}|\s?UTC)?",
    ),
    ("iso_date", r"\b\d{4}-\d{2}-\d{2}\b"),
    ("long_date", rf"\b(?:{_DAYS}\s+)?{_MONTHS}\s+\d{{1,2}}(?:st|nd|rd|th)?,?\s+\d{{4}}\b"),
    ("day_month_year", rf"\b(?:{_DAYS}\s+)?\d{{1,2}}\s+{_MONTHS}\s+\d{{4}}\b"),
    ("slash_date", r"\b\d{1,2}/\d{1,2}/\d{2,4}\b"),
    ("clock_time", r"\b\d{1,2}:\d{2}(?::\d{2})?(?:\s?[AaPp][Mm])?(?:\s?(?:UTC|GMT|[A-Z]{3,4}))?\b"),
    ("unix_time_ms", r"\b1[5-9]\d{11}\b"),
    ("unix_time", r"\b1[5-9]\d{8}(?:\.\d+)?\b"),
    ("hex_id", r"\b(?=[0-9a-f]*\d)(?=[0-9a-f]*[a-f])[0-9a-f]{16,64}\b"),
    (
        "request_id",
        r"(?i)\b(?:request|req|trace|span|correlation|session|run|message|msg)[ _-]?id\s*[:=#]?\s*[\"']?[\w.:-]{6,}",
    ),
    ("counter", r"(?i)\b(?:turn|request|call|step|attempt|iteration|message|round)\s*(?:#|no\.?|number)?\s*\d+\b"),
    # "Current time: ..." to the end of its line, but only when it carries a value (a digit):
    # a rule such as "Never put a timestamp in answers" is not a per-turn value. It starts at
    # the keyword so the stable text before it on the same line ("You are ...") stays in the prefix.
    (
        "current_line",
        r"(?i)\b(?:current (?:time|date|datetime)|now is|today is|timestamp|as of)\b[^\n]*\d[^\n]*",
    ),
)

_COMPILED = tuple((name, re.compile(pattern)) for name, pattern in BUILTIN_PATTERNS)


def compile_named(extra: Mapping[str, str]) -> tuple[tuple[str, re.Pattern[str]], ...]:
    """The built-in patterns followed by the config's ``name: regex`` patterns (validated elsewhere)."""
    return _COMPILED + tuple((name, re.compile(p)) for name, p in extra.items())


def find_volatile(
    text: str, patterns: tuple[tuple[str, re.Pattern[str]], ...] = _COMPILED
) -> list[tuple[int, int, str]]:
    """Return non-overlapping (start, end, pattern name) spans, earliest and longest first."""
    spans: list[tuple[int, int, str]] = []
    for name, rx in patterns:
        spans.extend((m.start(), m.end(), name) for m in rx.finditer(text) if m.end() > m.start())
    spans.sort(key=lambda s: (s[0], -(s[1] - s[0])))
    kept: list[tuple[int, int, str]] = []
    for span in spans:
        if kept and span[0] < kept[-1][1]:
            continue
        kept.append(span)
    return kept


def strip_volatile(text: str) -> str:
    """Replace every per-turn value with a fixed token (for hashing, not for sending)."""
    out: list[str] = []
    last = 0
    for start, end, name in find_volatile(text):
        out.append(text[last:start])
        out.append(f"<{name}>")
        last = end
    out.append(text[last:])
    return "".join(out)
