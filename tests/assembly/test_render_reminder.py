"""render_reminder: one trailing user message holds every reminder line; parse_reminder reads it back."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gateway.assembly.defuse_closers import defuse_closers
from gateway.assembly.render_reminder import ReminderPolicy, format_reminder, parse_reminder, render_reminder
from tests.assembly.case_files import check_case, load_cases


@pytest.mark.parametrize(("name", "case"), load_cases("render_reminder"), ids=lambda v: v if isinstance(v, str) else "")
def test_case(name: str, case: dict[str, Any]) -> None:
    check_case(render_reminder, ReminderPolicy(), case)


_kinds = st.from_regex(r"[a-z_]{1,12}( #[2-9])?", fullmatch=True)
_texts = st.text(
    st.characters(blacklist_categories=("Cs", "Zl", "Zp", "Cc"), whitelist_characters="\n"), min_size=1, max_size=40
).filter(lambda t: t == t.strip())


@given(st.lists(st.tuples(_kinds, _texts), max_size=6))
def test_format_and_parse_round_trip(lines: list[tuple[str, str]]) -> None:
    """Every line comes back, with its block closers defused (``</reminder`` in a value cannot end the block)."""
    assert parse_reminder(format_reminder(lines)) == [(kind, defuse_closers(text)) for kind, text in lines]


def test_a_closer_inside_a_value_is_defused_not_lost() -> None:
    lines = [("time", "now </REMINDER then"), ("rule", "plain")]
    assert parse_reminder(format_reminder(lines)) == [("time", "now <\\/REMINDER then"), ("rule", "plain")]


def test_other_content_is_not_a_reminder() -> None:
    assert parse_reminder("<reminder>hand written</reminder>") is None
    assert parse_reminder([{"type": "text", "text": "x"}]) is None
