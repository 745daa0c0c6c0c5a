"""restate_rules: critical rules stay at the start and are restated at the end, within a budget."""

from __future__ import annotations

from typing import Any

import pytest

from gateway.assembly.restate_rules import RuleSpec, RulesPolicy, find_rules, restate_rules
from tests.assembly.case_files import check_case, context_of, load_cases


@pytest.mark.parametrize(("name", "case"), load_cases("restate_rules"), ids=lambda v: v if isinstance(v, str) else "")
def test_case(name: str, case: dict[str, Any]) -> None:
    check_case(restate_rules, RulesPolicy(**case.get("policy", {})), case)


def test_restated_rules_fit_the_budget_and_go_by_priority() -> None:
    rules = tuple(RuleSpec(text=f"Rule number {i} must hold.", priority=i % 4) for i in range(30))
    case = {"request": {"messages": [{"role": "system", "content": "x"}, {"role": "user", "content": "y"}]}}
    ctx = context_of(case)
    policy = RulesPolicy(rules=rules, budget_tokens=60)
    out, decisions = restate_rules(ctx, policy)
    kept = [text for _kind, text in out.reminder]
    cost = sum(ctx.env.counter.text(f"critical_rule: {t}\n") for t in kept)
    assert 0 < cost <= 60
    omitted = decisions[-1].detail["rules"]
    assert len(kept) + len(omitted) == 30
    worst_kept = min(r.priority for r in rules if r.text in kept)
    best_omitted = max(r.priority for r in rules if r.text in omitted)
    assert worst_kept >= best_omitted


def test_rule_needs_exactly_one_of_text_or_pattern() -> None:
    with pytest.raises(ValueError, match="exactly one"):
        RuleSpec(text="a", pattern="b")
    with pytest.raises(ValueError, match="exactly one"):
        RuleSpec()


def test_a_system_prompt_seen_before_is_not_searched_again_for_its_rules(monkeypatch: pytest.MonkeyPatch) -> None:
    """The restate pass and lint each look for the rules of every request, and a session's system prompt
    is the same text every turn: the search runs once per prompt text, and a changed prompt is searched."""
    from gateway.assembly import restate_rules as module

    searched: list[str] = []
    real = module._rules_in
    monkeypatch.setattr(module, "_rules_in", lambda system, policy: searched.append(system) or real(system, policy))
    policy = RulesPolicy()
    prompt = "You are terse. <critical>Never delete files.</critical>"
    first = find_rules([{"role": "system", "content": prompt}, {"role": "user", "content": "hi"}], policy)
    again = find_rules([{"role": "system", "content": str(prompt)}, {"role": "user", "content": "more"}], policy)
    assert [r.text for r in again] == [r.text for r in first] and first
    assert len(searched) == 1
    changed = find_rules([{"role": "system", "content": prompt + " <critical>Ask first.</critical>"}], policy)
    assert len(searched) == 2 and len(changed) == len(first) + 1
