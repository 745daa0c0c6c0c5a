"""budget_report: tokens per component add up to the billed prompt; waste is flagged with a suggestion."""

from __future__ import annotations

from gateway.assembly.budget_report import COMPONENTS, budget_report, generation_reserve
from gateway.assembly.pipeline import assemble
from gateway.assembly.policy import Policy
from tests.assembly.case_files import context_of
from tests.shared_data import data_rows


def _toolbench_request() -> dict:
    row = data_rows("toolbench.jsonl")[0]
    return {"model": "gpt-4o-mini", "messages": row["messages"], "tools": row["tools"], "max_completion_tokens": 700}


def test_components_add_up_to_the_prompt_and_the_reserve_is_the_request_limit() -> None:
    ctx = assemble(context_of({"request": _toolbench_request()}), Policy()).assembled
    report = budget_report(ctx)
    assert [line.component for line in report.lines] == list(COMPONENTS)
    assert report.prompt_tokens == ctx.prompt_tokens()
    assert sum(line.tokens for line in report.lines if line.component != "reserve") == report.prompt_tokens
    assert report.reserve == 700
    tokens = {line.component: line.tokens for line in report.lines}
    assert tokens["tools"] == ctx.env.counter.tools(ctx.tools) > 0
    assert tokens["history"] > 0 and tokens["query"] > 0


def test_flags_a_component_over_30_percent_with_a_concrete_suggestion() -> None:
    history = []
    for i in range(40):
        history += [{"role": "user", "content": f"step {i} " + "details " * 40}, {"role": "assistant", "content": "ok"}]
    messages = [{"role": "system", "content": "Be brief."}, *history, {"role": "user", "content": "next?"}]
    report = budget_report(context_of({"request": {"messages": messages}}))
    flagged = {line.component: line.suggestion for line in report.waste}
    assert list(flagged) == ["history"]
    assert "compact_history" in flagged["history"]


def test_small_requests_are_not_flagged_and_reserve_defaults() -> None:
    report = budget_report(
        context_of({"request": {"messages": [{"role": "system", "content": "x"}, {"role": "user", "content": "y"}]}})
    )
    assert report.waste == ()
    assert report.reserve == generation_reserve({}) == 4096
    assert generation_reserve({"max_tokens": 10, "max_completion_tokens": 20}) == 20


def test_calibration_scale_multiplies_the_counts() -> None:
    ctx = context_of({"request": {"messages": [{"role": "user", "content": "hello " * 100}]}})
    plain, scaled = budget_report(ctx), budget_report(ctx, scale=1.5)
    assert abs(scaled.prompt_tokens - plain.prompt_tokens * 1.5) <= len(COMPONENTS) / 2
    assert scaled.scale == 1.5


def test_recalled_passages_are_recalled_not_documents_in_the_budget_and_the_prefix() -> None:
    """Issue 37: recalled passages were "documents" (and led the Cache dashboard's prefix breaks as such)."""
    from gateway.assembly.prefix import component_of

    recalled = {"role": "user", "content": '<recalled turns="1">\nThe dog is called Rex.\n</recalled>'}
    question = {"role": "user", "content": "What is my dog called?"}
    body = {"model": "gpt-4o-mini", "messages": [{"role": "system", "content": "Be brief."}, recalled, question]}
    report = budget_report(context_of({"request": body}))
    tokens = {line.component: line.tokens for line in report.lines}
    assert tokens["recalled"] > 0 and tokens["documents"] == 0
    assert component_of(recalled) == "recalled"
