"""place_cache_breakpoints: Anthropic-style markers where the stable prefix ends, at most 4, never on the reminder."""

from __future__ import annotations

from typing import Any

import pytest

from gateway.assembly.place_cache_breakpoints import CachePolicy, count_breakpoints, place_cache_breakpoints
from gateway.assembly.render_reminder import parse_reminder
from gateway.assembly.verify_assembly import verify_assembly
from tests.assembly.case_files import check_case, context_of, load_cases

CASES = load_cases("place_cache_breakpoints")


@pytest.mark.parametrize(("name", "case"), CASES, ids=lambda v: v if isinstance(v, str) else "")
def test_case(name: str, case: dict[str, Any]) -> None:
    check_case(place_cache_breakpoints, CachePolicy(), case)


@pytest.mark.parametrize(("name", "case"), CASES, ids=lambda v: v if isinstance(v, str) else "")
def test_at_most_four_never_on_the_reminder_and_safe(name: str, case: dict[str, Any]) -> None:
    ctx = context_of(case)
    out, decisions = place_cache_breakpoints(ctx, CachePolicy())
    assert count_breakpoints(out.messages, out.tools) <= 4
    assert verify_assembly(ctx, out, decisions) == []
    for message in out.messages:
        if parse_reminder(message.get("content")) is not None:
            assert "cache_control" not in str(message)


def test_the_latest_breakpoint_goes_before_a_recalled_block_not_on_the_question_after_it() -> None:
    """Recall places its block just before the question; the next turn resends the question without it, so a
    breakpoint on the question would cache a prefix never read again. It goes on the client's message before."""
    messages = [
        {"role": "system", "content": "You are terse. " * 200},
        {"role": "user", "content": "What did we decide about the venue?"},
        {"role": "assistant", "content": "We chose the Porto venue."},
        {"role": "user", "content": '<recalled passages="1" note="earlier">\nuser: venue is Porto\n</recalled>'},
        {"role": "user", "content": "And the date?"},
    ]
    ctx = context_of({"request": {"model": "claude-sonnet-4", "messages": messages}, "provider": "anthropic"})
    out, decisions = place_cache_breakpoints(ctx, CachePolicy())
    marked = [i for i, m in enumerate(out.messages) if "cache_control" in str(m)]
    assert 2 in marked and 4 not in marked and 3 not in marked
    assert verify_assembly(ctx, out, decisions) == []
