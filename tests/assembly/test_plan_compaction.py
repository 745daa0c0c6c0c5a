"""plan_compaction: name the next range to summarise once past prepare_at, once per compaction."""

from __future__ import annotations

from dataclasses import replace

import pytest

from gateway.assembly.compact_history import compact_history
from gateway.assembly.plan_compaction import plan_compaction
from gateway.assembly.summarize_range import summarize_range
from gateway.config import parse_settings
from gateway.errors import ConfigError
from tests.assembly.compaction_helpers import COUNTER, conversation, make_ctx, policy

# Pinned at the 0.35 target these cases were written for: at the 8K test window the default 0.25 target
# leaves no room below it for the head, the newest turns and a summary.
POLICY = policy(strategies=["summarize"], summary_max_tokens=400, keep_recent_turns=2, target=0.35).compaction


def _between_watermarks() -> list[dict]:
    """The last conversation length under the threshold: the next turn crosses it."""
    found = None
    for n in range(1, 60):
        tokens = make_ctx(conversation(n)).prompt_tokens()
        if 0.45 * 8000 < tokens <= 0.55 * 8000:
            found = conversation(n)
    assert found is not None, "no conversation length falls between the watermarks"
    return found


def test_no_plan_below_the_lower_watermark() -> None:
    ctx = make_ctx(conversation(3))
    assert plan_compaction(ctx, ctx, POLICY) is None


def test_no_summary_is_prepared_for_a_threshold_the_next_turn_does_not_reach() -> None:
    """Before: every request past ``prepare_at`` prepared one, and a session that ended between the
    watermarks (tau2's solo run) paid for a summariser call never sent."""
    for n in range(1, 60):
        messages = conversation(n)
        ctx = make_ctx(messages)
        tokens = ctx.prompt_tokens()
        if tokens > 0.45 * 8000 and make_ctx(conversation(n + 1)).prompt_tokens() <= 0.55 * 8000 - 200:
            assert plan_compaction(ctx, ctx, POLICY) is None
            return
    raise AssertionError("no conversation length falls two turns under the threshold")


def test_plans_the_middle_between_the_watermarks() -> None:
    messages = _between_watermarks()
    ctx = make_ctx(messages)
    plan = plan_compaction(ctx, ctx, POLICY)
    assert plan is not None
    assert plan.start == 2 and plan.end <= len(messages) - 8, "the two recent turns are never planned away"
    assert messages[plan.end]["role"] != "tool", "a planned range never ends between a call and its result"
    assert plan.previous is None


def test_a_prepared_checkpoint_is_used_when_the_threshold_is_crossed() -> None:
    messages = _between_watermarks()
    ctx = make_ctx(messages)
    plan = plan_compaction(ctx, ctx, POLICY)
    assert plan is not None
    prepared = summarize_range(plan.messages, plan.start, plan.end, plan.previous, None, POLICY, COUNTER).checkpoint
    state = replace(ctx.session, checkpoints=(prepared,))
    assert plan_compaction(ctx, make_ctx(messages, state=state), POLICY) is None, "one preparation per compaction"
    longer = messages + conversation(6)[2:]
    crossing = make_ctx(longer, state=state)
    assert crossing.prompt_tokens() > 0.55 * 8000
    out, decisions = compact_history(crossing.replace(session=state), POLICY)
    assert [d.action for d in decisions] == ["compacted"], "a first use changes the prefix: not a reuse"
    assert decisions[0].detail["summarizer_calls"] == 0 and decisions[0].detail["prepared"] is True
    assert decisions[0].detail["prepared_ahead"] is True
    assert out.messages[2]["content"].endswith(prepared.summary.replace("</summary", "<\\/summary") + "\n</summary>")


def test_config_rejects_a_summarizer_model_that_is_not_configured() -> None:
    with pytest.raises(ConfigError, match=r"policy\.compaction\.summarizer_model"):
        parse_settings({"models": [], "policy": {"compaction": {"summarizer_model": "nope"}}})


def test_config_rejects_prepare_at_above_threshold() -> None:
    with pytest.raises(ConfigError, match="prepare_at"):
        parse_settings({"policy": {"compaction": {"threshold": 0.5, "prepare_at": 0.6}}})
