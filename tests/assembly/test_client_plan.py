"""The client's context-management terms written into the gateway's policy (pure)."""

from __future__ import annotations

from gateway.assembly.client_plan import messages_ask, plan_decision, planned_policy, responses_ask
from gateway.assembly.context import Decision
from gateway.assembly.policy import Policy

WINDOW = 8000


def test_a_compact_threshold_becomes_the_threshold_with_the_watermarks_in_order() -> None:
    policy = Policy()
    planned = planned_policy(policy, responses_ask(900, True, 3000, 700), WINDOW).compaction
    assert int(planned.threshold * WINDOW) == 900
    assert planned.prepare_at <= planned.threshold and planned.target <= planned.threshold
    assert planned.keep_recent_rounds == policy.compaction.keep_recent_rounds
    assert planned_policy(policy, responses_ask(0, False, 100, 100), WINDOW) is policy, "no terms: the policy"


def test_keep_and_exclude_tools_are_honoured_and_one_decision_names_both() -> None:
    policy = Policy()
    edit = {"type": "clear_tool_uses_20250919", "keep": {"type": "tool_uses", "value": 6}, "exclude_tools": ["ls"]}
    ask = messages_ask({"edits": [edit]}, [])
    planned = planned_policy(policy, ask, WINDOW)
    assert planned.compaction.keep_tool_results == 6 and planned.compaction.keep_recent_rounds == 6
    assert planned.compaction.never_clear == ("ls",)
    assert messages_ask({"edits": [{"type": "clear_tool_uses_20250919"}]}, []).keep_tool_uses == 3, "the default"
    decision = plan_decision(ask, policy, planned, WINDOW, [Decision("clear_tool_results", "cleared", 5000, 3000)])
    assert decision.pass_name == "context_management" and decision.action == "gateway"
    assert decision.detail["gateway"]["planned"]["keep_tool_results"] == 6
    assert decision.detail["client"]["params"] == {"edits": [edit]}
    assert (decision.tokens_before, decision.tokens_after) == (5000, 3000)
