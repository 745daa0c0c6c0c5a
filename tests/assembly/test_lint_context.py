"""lint_context: the skill card's validation gate, one Decision per finding, never a change."""

from __future__ import annotations

from typing import Any

import pytest

from gateway.assembly.context import Decision
from gateway.assembly.lint_context import LintPolicy, lint_context, violations
from gateway.assembly.pipeline import assemble
from gateway.assembly.policy import Policy
from tests.assembly.case_files import check_case, context_of, load_cases


@pytest.mark.parametrize(("name", "case"), load_cases("lint_context"), ids=lambda v: v if isinstance(v, str) else "")
def test_case(name: str, case: dict[str, Any]) -> None:
    check_case(lint_context, LintPolicy(**case.get("policy", {})), case)


def test_only_errors_are_violations() -> None:
    found = [
        Decision("lint_context", "finding", detail={"check": "a", "severity": "warning"}),
        Decision("lint_context", "finding", detail={"check": "b", "severity": "error"}),
        Decision("move_volatile", "moved", detail={"severity": "error"}),
    ]
    assert [d.detail["check"] for d in violations(found)] == ["b"]


def test_the_pipeline_fixes_what_the_gate_flags_in_the_raw_request() -> None:
    case = {
        "request": {
            "messages": [
                {"role": "system", "content": "Current time: 2026-11-29 10:00\n<critical>Never guess.</critical>"},
                {"role": "user", "content": "hi"},
            ]
        }
    }
    ctx = context_of(case)
    raw = assemble(ctx, Policy().all_disabled().model_copy(update={"lint": LintPolicy()}))
    assert {d.detail["check"] for d in violations(raw.decisions)} == {"volatile_in_prefix", "critical_rules_at_edges"}
    assembled = assemble(ctx, Policy())
    assert violations(assembled.decisions) == []
    assert not assembled.reverted


def test_a_rule_wrapped_over_lines_is_found_at_both_edges() -> None:
    system = "Team notes.\n<critical>Cite the ticket\n   number in every answer.</critical>"
    ctx = context_of(
        {"request": {"messages": [{"role": "system", "content": system}, {"role": "user", "content": "go"}]}}
    )
    result = assemble(ctx, Policy())
    assert not [d for d in result.decisions if d.detail.get("check") == "critical_rules_at_edges"]
    assert "Cite the ticket number in every answer." in result.assembled.messages[-1]["content"]
