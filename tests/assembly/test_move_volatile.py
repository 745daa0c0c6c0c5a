"""move_volatile: per-turn values leave the prefix, the placeholders never depend on the value."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gateway.assembly.context import SessionState
from gateway.assembly.move_volatile import VolatilePolicy, compiled_patterns, move_volatile, pattern_spans
from gateway.assembly.volatile_patterns import compile_named
from tests.assembly.case_files import check_case, context_of, load_cases

_LINES = st.sampled_from(
    [
        "Current time: 2026-11-29T10:{:02d}:00Z",
        "Request ID: 3f2a9b1c-1111-2222-3333-4444555566{:02d}",
        "This is turn {}.",
        "Build wp{:02d}x is live.",
        "Today is 29 Nov 2026, slot {}.",
        "trace_id=abcdef12{:04d}",
        "Queue depth {} jobs.",
    ]
)


@pytest.mark.parametrize(("name", "case"), load_cases("move_volatile"), ids=lambda v: v if isinstance(v, str) else "")
def test_case(name: str, case: dict[str, Any]) -> None:
    check_case(move_volatile, VolatilePolicy(**case.get("policy", {})), case)


def _turn(system: str, state: SessionState) -> tuple[str, SessionState, list[tuple[str, str]]]:
    case = {"request": {"messages": [{"role": "system", "content": system}, {"role": "user", "content": "hi"}]}}
    ctx = context_of(case).replace(session=state)
    out, _ = move_volatile(ctx.replace(session=state), VolatilePolicy())
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
        if turn > 1:  # a clock or a counter is per-turn once it changed; on turn 1 it could be static text
            assert f"10:{turn:02d}:00 UTC" in " ".join(dict(reminder).values())
            assert f"turn {turn}" in dict(reminder).values()
    # turn 1 cannot know the clock, counter and pool name are volatile; from turn 2 on the prefix never changes
    assert "This is turn 1." in prefixes[0] and "10:01:00 UTC" in prefixes[0]
    assert len(set(prefixes[1:])) == 1, prefixes
    assert "[learned: see reminder]" in prefixes[-1]


def test_only_the_value_moves_and_the_rest_of_its_line_stays() -> None:
    system = "Current time: 2026-11-29T16:00:00Z NEVER push to main without review\nToday is 29 Nov 2026. Be kind."
    before = "Current time: 2026-11-28T15:00:00Z NEVER push to main without review\nToday is 28 Nov 2026. Be kind."
    prefix, _, reminder = _turn(system, SessionState("s", previous_system=(before,)))
    assert prefix == (
        "[current_line: see reminder] NEVER push to main without review\n[current_line #2: see reminder]. Be kind."
    )
    assert reminder == [
        ("current_line", "Current time: 2026-11-29T16:00:00Z"),
        ("current_line #2", "Today is 29 Nov 2026"),
    ]


def test_a_static_clock_time_is_never_moved_and_a_changing_one_is_moved_whole() -> None:
    state = SessionState("s")
    for turn in range(1, 4):
        system = f"Standup is at 2:30pm.\nShift clock 10:{turn * 7:02d} local.\nBe kind."
        prefix, state, reminder = _turn(system, state)
        assert "Standup is at 2:30pm." in prefix, "a clock time that never changes is static text"
        if turn == 1:
            assert reminder == [] and prefix == system
        else:
            assert reminder == [("learned", f"10:{turn * 7:02d}")], "the whole clock time, not the digits that changed"
            assert prefix == "Standup is at 2:30pm.\nShift clock [learned: see reminder] local.\nBe kind."


def test_tool_definitions_are_never_edited() -> None:
    tool = {
        "type": "function",
        "function": {"name": "CronCreate", "description": "Run a job, e.g. at 2:30pm or at 2026-11-29T10:00:00Z."},
    }
    case = {"request": {"messages": [{"role": "system", "content": "Request id: r-123456"}], "tools": [tool]}}
    ctx = context_of(case)
    for _turn_number in range(3):
        out, _ = move_volatile(ctx, VolatilePolicy())
        assert out.tools is ctx.tools
        ctx = ctx.replace(session=out.session)


def test_rejects_a_pattern_name_that_is_not_an_identifier() -> None:
    with pytest.raises(ValueError, match="identifier"):
        VolatilePolicy(patterns={"bad name": "x"})


def test_rejects_an_invalid_regex() -> None:
    with pytest.raises(ValueError, match="not a valid regex"):
        VolatilePolicy(patterns={"bad": "("})


@settings(max_examples=120, deadline=None)
@given(st.integers(0, 50), st.data())
def test_prefix_is_byte_identical_from_the_second_turn_whatever_the_values(n: int, data: st.DataObject) -> None:
    template = data.draw(st.lists(_LINES, min_size=1, max_size=4, unique=True))
    filler = data.draw(
        st.lists(st.sampled_from(["Be brief.", "Use tools.", "Cite sources.", ""]), min_size=4, max_size=4)
    )
    state = SessionState("s")
    outputs = []
    for turn in range(3):
        lines = [f"{filler[i]}\n{line.format(n + turn * 7)}" for i, line in enumerate(template)]
        prefix, state, _ = _turn("\n".join(lines), state)
        outputs.append(prefix)
    assert outputs[1] == outputs[2], outputs
    again = context_of({"request": {"messages": [{"role": "system", "content": outputs[2]}]}})
    out = move_volatile(again.replace(session=state), VolatilePolicy())[0]
    assert out.messages[0]["content"] == outputs[2], "not idempotent"


def test_span_memo_answers_for_the_pattern_set_it_is_asked_with() -> None:
    text = "Build 4711 at 2026-11-30T10:00:00Z, ticket ABC-9"
    default = compiled_patterns(())
    ticket = compiled_patterns((("ticket", r"ABC-\d+"),))
    assert {name for _, _, name in pattern_spans(text, default)} == {"iso_datetime"}
    assert {name for _, _, name in pattern_spans(text, ticket)} == {"iso_datetime", "ticket"}
    for _ in range(40):  # equal sets built anew (new objects, ids reused after they are freed)
        fresh = compile_named({"ticket": r"ABC-\d+"})
        assert pattern_spans(text, fresh) == pattern_spans(text, ticket)
        assert pattern_spans(text, compile_named({})) == pattern_spans(text, default)


def test_a_per_turn_value_the_session_never_changed_stays_in_the_prefix() -> None:
    """tau2's "The current time is 2025-02-25 12:08:00 EST." is the same on every turn of a session: left
    where it is it is cached with the prompt; moved (before) it cost an uncached reminder line every turn
    and made the session costlier than sending it directly. It moves from the turn its value changes."""
    state = SessionState("s")
    system = "# Policy\n\nThe current time is 2025-02-25 12:08:00 EST.\n\nBe precise. Request id: req-8f3a2b91."
    for _ in range(3):
        prefix, state, reminder = _turn(system, state)
        assert prefix == system and reminder == []
    later = system.replace("12:08:00", "12:09:30")
    prefix, state, reminder = _turn(later, state)
    assert prefix == "# Policy\n\nThe [current_line: see reminder].\n\nBe precise. Request id: req-8f3a2b91."
    assert reminder == [("current_line", "current time is 2025-02-25 12:09:30 EST")]
    prefix, state, reminder = _turn(later, state)  # once it changed it keeps moving, so the prefix stays
    assert prefix.startswith("# Policy\n\nThe [current_line: see reminder].") and reminder


def test_a_request_with_no_system_text_now_or_before_is_left_as_it_is() -> None:
    """Nothing to move, learn or remember: the same context, the session's state untouched. A session whose
    earlier turns had system text still records that it has none now."""
    ctx = context_of({"request": {"messages": [{"role": "user", "content": "It is 2026-11-29 10:01:00 UTC."}]}})
    out, decisions = move_volatile(ctx, VolatilePolicy())
    assert out is ctx and decisions == []
    had = ctx.replace(session=SessionState("s", previous_system=("Be precise.",)))
    out, decisions = move_volatile(had, VolatilePolicy())
    assert out.session.previous_system == () and decisions == []
