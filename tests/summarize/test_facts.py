"""facts: what a summary must still carry, found literally."""

from __future__ import annotations

import pytest

from gateway.summarize.facts import extract_facts, missing_facts


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Booking QX-48213 confirmed", "QX-48213"),
        ("arrives 2026-03-14 at 10:30", "2026-03-14"),
        ("arrives 2026-03-14 at 10:30", "10:30"),
        ("costs $1,234.50 in total", "$1,234.50"),
        ("see https://example.com/a?b=1 for details", "https://example.com/a?b=1"),
        ("config in /srv/app/conf.yaml now", "/srv/app/conf.yaml"),
        ("edit gateway/tokens.py first", "gateway/tokens.py"),
        ("mail ana.ruiz@example.org today", "ana.ruiz@example.org"),
        ("I am 35 years old", "35"),
    ],
)
def test_finds_the_literal_fact(text: str, expected: str) -> None:
    assert expected in extract_facts(text)


def test_ignores_prose_and_single_digits() -> None:
    assert extract_facts("We talked about 3 things and it was fine.") == []


def test_tool_names_can_be_required_too() -> None:
    assert extract_facts("no facts here", extra=["search_flights"]) == ["search_flights"]


def test_missing_facts_lists_what_the_summary_lost() -> None:
    assert missing_facts(["QX-1", "2026-01-02"], "kept QX-1 only") == ["2026-01-02"]
