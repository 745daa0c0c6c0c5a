"""facts: what a summary must still carry, found literally."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gateway.summarize.facts import _Remembered, extract_facts, extract_facts_of, missing_facts, prose_dates


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


_PIECES = ["QX-48213", "2026-03-14", "10:30", "$1,234.50", "https://example.com/a", "/srv/app/conf.yaml",
           "gateway/tokens.py", "ana@example.org", "35", "7", "May 3rd", "on Tuesday", "7 pm", "and", ".", ",",
           "-", "/", " ", "\n", "x", "v2"]


@settings(max_examples=200, deadline=None)
@given(st.lists(st.lists(st.sampled_from(_PIECES), max_size=12).map("".join), max_size=6))
def test_the_facts_of_texts_are_those_of_the_joined_text_on_every_call(texts: list[str]) -> None:
    """The per-line scan (remembered per text) finds what one scan of the joined text finds, in the same
    order, on the first call and on a remembered one."""
    joined = "\n".join(texts)
    for _ in range(2):
        assert extract_facts_of(texts, extra=["find_tools"]) == extract_facts(joined, extra=["find_tools"])
        assert [extract_facts(t) for t in texts] == [extract_facts(t) for t in texts]
    assert prose_dates(joined) == prose_dates(joined)


def test_the_remembered_scans_stay_within_their_characters() -> None:
    calls: list[str] = []
    memo = _Remembered(lambda text: calls.append(text) or (text[:1],), max_chars=160)
    texts = [f"{i:02d}" + "x" * 8 for i in range(30)]  # 10 characters each: 16 fit
    for text in texts:
        assert memo(text) == (text[:1],)
    assert memo(texts[-1]) == (texts[-1][:1],) and len(calls) == 30, "the newest is remembered"
    memo(texts[0])
    assert len(calls) == 31, "the oldest was dropped to stay within 160 characters"
    memo("y" * 11)
    memo("y" * 11)
    assert len(calls) == 33, "a text over a sixteenth of the room is scanned each time, not kept"
