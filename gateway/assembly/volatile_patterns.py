"""Patterns that recognise per-turn values (timestamps, ids, counters) inside prompt text.

Shared by the volatile-state pass and by session identification: a timestamp in the
system prompt must not make every turn look like a new conversation.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

_MONTHS = r"(?:Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Sept|Oct|Nov|Dec)[a-z]*\.?"
_DAYS = r"(?:Mon|Tue|Wed|Thu|Fri|Sat|Sun)[a-z]*,?"

#: A time zone after a time: UTC, GMT, Z or an abbreviation ending in T (CET, PDT, CEST).
_TZ = r"(?:UTC|GMT|Z|[A-Z]{1,3}T)"
#: One word of a date/time value: digits (with their separators, "2026-11-29T10:00:00+02:00",
#: "10:30", "3/4/26"; a dot only between digits, so a full stop ends the value), a month or
#: weekday name, am/pm, a time zone.
_DIGIT_WORD = r"\d[\w:/+-]*(?:\.\d[\w:/+-]*)*"
_NAME_WORD = rf"(?:{_MONTHS}|{_DAYS}|[AaPp]\.?[Mm]\.?|{_TZ}|at)(?![\w])"
_VALUE = rf"(?:{_NAME_WORD}[ ,]+)*{_DIGIT_WORD}(?:[ ,]+(?:{_DIGIT_WORD}|{_NAME_WORD}))*"
_LABEL = r"\b(?i:current (?:time|date|datetime)|now is|today is|timestamp|as of)\b\s*(?:is\b\s*)?[:=]?\s*"

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
        r"(?i)\b(?:request|req|trace|span|correlation|session|run|message|msg)[ _-]?id\s*[:=#]?\s*[\"']?"
        r"(?=[\w.:-]{6,})[\w:-]+(?:\.[\w:-]+)*",  # a full stop after the id ends it
    ),
    ("counter", r"(?i)\b(?:turn|request|call|step|attempt|iteration|message|round)\s*(?:#|no\.?|number)?\s*\d+\b"),
    # "Current time: <value>": the label and the date/time value after it, and nothing more of the
    # line, so a rule written after the value ("... 10:00Z. NEVER push to main") stays in the prefix.
    # Only when the value carries a digit: "Never put a timestamp in answers" is not a per-turn value.
    ("current_line", rf"{_LABEL}{_VALUE}"),
)

#: The built-in patterns whose matches are per-turn whatever the session has seen: a timestamp with a
#: time of day, a request/trace id, an explicit "current time/date" label, a millisecond epoch. The
#: others (a bare date, a clock time such as "at 2:30pm", a UUID, a counter such as "Step 1") are as
#: often static text; ``move_volatile`` moves what they match only once it changed between turns.
PER_TURN_PATTERNS = frozenset({"iso_datetime", "request_id", "current_line", "unix_time_ms"})

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
