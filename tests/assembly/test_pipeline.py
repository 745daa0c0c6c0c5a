"""The whole pipeline on generated requests: always safe, and stable when run on its own output."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings

from gateway.assembly.context import Context
from gateway.assembly.pipeline import PASSES, assemble
from gateway.assembly.policy import Policy
from gateway.assembly.restate_rules import RuleSpec, RulesPolicy
from gateway.assembly.verify_assembly import tool_pairing_problems, verify_assembly
from tests.assembly.strategies import contexts

POLICY = Policy().model_copy(update={"rules": RulesPolicy(rules=(RuleSpec(text="Never delete data."),))})
PROPERTY_SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def test_passes_sit_at_their_numbered_slots() -> None:
    assert [p.name for p in PASSES] == [
        "move_volatile",
        "attach_documents",
        "prune_tools",
        "clear_tool_results",
        "compact_history",
        "condense_tail",
        "shrink_oversize",
        "recall_memory",
        "restate_rules",
        "render_reminder",
        "place_cache_breakpoints",
        "hint_cache",
        "lint_context",
    ]


@PROPERTY_SETTINGS
@given(contexts())
def test_output_passes_the_safety_check_or_is_the_original(ctx: Context) -> None:
    result = assemble(ctx, POLICY)
    if result.reverted:  # the best stage of the plan that passes the check, or the client's request
        assert result.assembled is ctx or verify_assembly(ctx, result.assembled, result.decisions) == []
    else:
        assert verify_assembly(ctx, result.assembled, result.decisions) == []
    assert not result.reverted, [d.reason for d in result.decisions if d.action == "reverted"]
    assert tool_pairing_problems(result.assembled.messages) == []


@PROPERTY_SETTINGS
@given(contexts())
def test_running_the_pipeline_twice_changes_nothing(ctx: Context) -> None:
    once = assemble(ctx, POLICY).assembled
    twice = assemble(once.replace(session=ctx.session, reminder=(), annotations={}), POLICY).assembled
    assert twice.messages == once.messages
    assert twice.tools == once.tools


@PROPERTY_SETTINGS
@given(contexts())
def test_every_pass_off_forwards_the_request_untouched(ctx: Context) -> None:
    result = assemble(ctx, Policy().all_disabled())
    assert result.assembled is ctx
    assert result.decisions == ()


@PROPERTY_SETTINGS
@given(contexts())
def test_no_per_turn_value_is_left_in_the_prefix(ctx: Context) -> None:
    result = assemble(ctx, POLICY)
    checks = {d.detail.get("check") for d in result.decisions if d.pass_name == "lint_context"}
    assert "volatile_in_prefix" not in checks
    assert "dynamic_tail_last" not in checks


def _raising_pass(ctx: Context, policy: object) -> tuple[Context, list[object]]:
    raise KeyError("a bug in a pass")


def test_a_pass_that_raises_forwards_the_original_and_says_so() -> None:
    """Before: the KeyError escaped ``assemble`` and the client got a 500 with no answer."""
    from gateway.assembly.pipeline import PassSpec
    from tests.assembly.make_context import make_context

    ctx = make_context({"messages": [{"role": "user", "content": "hello"}]})
    broken = PassSpec("broken_pass", _raising_pass, lambda p: p.volatile)  # type: ignore[arg-type]
    result = assemble(ctx, POLICY, (PASSES[0], broken, *PASSES[1:]))
    assert result.reverted and result.assembled is ctx
    failed = [d for d in result.decisions if d.action == "pass_failed"]
    assert [d.pass_name for d in failed] == ["broken_pass"]
    assert "KeyError" in failed[0].reason


def _frozen(ctx: Context) -> Context:
    from dataclasses import replace

    from tests.frozen import freeze

    return replace(ctx, messages=freeze(ctx.messages), tools=freeze(ctx.tools), params=freeze(ctx.params))


@PROPERTY_SETTINGS
@given(contexts())
def test_no_pass_mutates_what_the_client_sent(ctx: Context) -> None:
    """Messages are reused across requests by identity: a write into one raises MutationError here."""
    assemble(_frozen(ctx), POLICY)


def test_no_pass_mutates_a_real_agent_loop_past_the_threshold() -> None:
    """A real tau2 run with its 30 tools at a window small enough that tools are pruned and history compacted."""
    from tests.assembly.make_context import make_context
    from tests.frozen import freeze
    from tests.shared_data import data_rows

    run = next(r for r in data_rows("agent_loops/tau2_telecom_default.jsonl") if len(r["messages"]) > 30)
    body = {"model": "gpt-4o-mini", "messages": run["messages"], "tools": run["tools"]}
    ctx = make_context(freeze(body), context_window=16_000)
    result = assemble(_frozen(ctx), POLICY)
    assert result.decisions  # something ran over it
