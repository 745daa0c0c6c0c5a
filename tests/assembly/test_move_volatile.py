"""move_volatile: per-turn values leave the prefix, the placeholders never depend on the value."""

from __future__ import annotations

from typing import Any

import pytest

from gateway.assembly.context import SessionState
from gateway.assembly.move_volatile import VolatilePolicy, move_volatile
from tests.assembly.case_files import check_case, context_of, load_cases


@pytest.mark.parametrize(("name", "case"), load_cases("move_volatile"), ids=lambda v: v if isinstance(v, str) else "")
def test_case(name: str, case: dict[str, Any]) -> None:
    check_case(move_volatile, VolatilePolicy(**case.get("policy", {})), case)


def _turn(system: str, state: SessionState) -> tuple[str, SessionState, list[tuple[str, str]]]:
    case = {"request": {"messages": [{"role": "system", "content": system}, {"role": "user", "content": "hi"}]}}
    ctx = context_of(case).replace(session=state)
    out, _ = move_volatile(ctx, state, VolatilePolicy())
    return out.messages[0]["content"], out.session, list(out.reminder)


def test_prefix_is_byte_stable_across_turns_with_clock_counter_and_unknown_value() -> None:
    state = SessionState("s")
    prefixes = []
    for turn in range(1, 8):
        system = (
            f"Current time: 2026-11-29 10:{turn:02d}:00 UTC\nThis is turn {turn}.\n"
            f"Worker pool wp{turn * 37 % 100:02d}x handles you.\nBe precise."
        )
        prefix, state, reminder = _turn(system, state)
        prefixes.append(prefix)
        assert f"turn {turn}" in dict(reminder).values()
    # turn 1 cannot know the pool name is volatile; from turn 2 on the prefix never changes
    assert len(set(prefixes[1:])) == 1, prefixes
    assert "[learned: see reminder]" in prefixes[-1]


def test_rejects_a_pattern_name_that_is_not_an_identifier() -> None:
    with pytest.raises(ValueError, match="identifier"):
        VolatilePolicy(patterns={"bad name": "x"})


def test_rejects_an_invalid_regex() -> None:
    with pytest.raises(ValueError, match="not a valid regex"):
        VolatilePolicy(patterns={"bad": "("})
