"""clear_tool_results: old results become stubs first; pairs, edges and cleared facts survive."""

from __future__ import annotations

from gateway.assembly.clear_tool_results import clear_tool_results
from gateway.assembly.pipeline import assemble
from gateway.assembly.verify_assembly import tool_pairing_problems, verify_assembly
from tests.assembly.compaction_helpers import COUNTER, conversation, make_ctx, policy, run_turns, turn

BOTH = {"summary_max_tokens": 400, "keep_recent_turns": 2}


def _cleared(result) -> list:
    return [d for d in result.decisions if d.action == "cleared"]


def test_does_nothing_under_the_threshold() -> None:
    ctx = make_ctx(conversation(5))
    out, decisions = clear_tool_results(ctx, policy().compaction)
    assert out is ctx and decisions == []


def test_clears_oldest_results_to_stubs_and_keeps_the_pairs() -> None:
    messages = conversation(28)
    ctx = make_ctx(messages)
    result = assemble(ctx, policy(**BOTH))
    cleared = _cleared(result)
    assert cleared, "over the threshold, tool results are cleared before anything is summarised"
    assert not [d for d in result.decisions if d.pass_name == "compact_history"]
    indices = [d.detail["message_index"] for d in cleared]
    assert indices == sorted(indices) and indices[0] == 4, "oldest first"
    out = result.assembled.messages
    for d in cleared:
        i = d.detail["message_index"]
        assert out[i]["content"].startswith("[result of search_docs cleared: ")
        assert out[i]["tool_call_id"] == messages[i]["tool_call_id"]
        assert d.tokens_after < d.tokens_before
    assert not tool_pairing_problems(out)
    assert verify_assembly(ctx, result.assembled, result.decisions) == []
    assert list(out[-8:]) == messages[-8:], "recent turns untouched"
    assert result.assembled.prompt_tokens() <= 0.45 * 8000 + COUNTER.messages(turn(0))


def test_the_stub_names_the_tool_and_its_size() -> None:
    messages = conversation(28)
    result = assemble(make_ctx(messages), policy(**BOTH))
    d = _cleared(result)[0]
    original = messages[d.detail["message_index"]]["content"]
    assert result.assembled.messages[d.detail["message_index"]]["content"] == (
        f"[result of search_docs cleared: {COUNTER.text(original):,} tokens]"
    )


def test_cleared_results_stay_cleared_on_the_next_turn() -> None:
    first, second = run_turns([conversation(28), conversation(29)], policy(**BOTH))
    a = {d.detail["message_index"] for d in _cleared(first)}
    b = {d.detail["message_index"] for d in _cleared(second)}
    assert a <= b, "sticky: a result cleared once is not restored, so the prefix stays stable"
    n = min(len(first.assembled.messages), len(second.assembled.messages)) - 10
    assert first.assembled.messages[:n] == second.assembled.messages[:n]


def test_gives_way_to_a_summary_when_clearing_cannot_reach_the_threshold() -> None:
    messages = conversation(120)
    messages[4] = {**messages[4], "content": "Result: customer account ACC-77121 migrated. " + "filler " * 80}
    result = run_turns([messages], policy(**BOTH))[0]
    assert not _cleared(result)
    assert [d.action for d in result.decisions] == ["compacted"]
    assert "ACC-77121" in result.assembled.messages[2]["content"]


def test_clearing_in_the_tail_keeps_the_checkpoint_reusable() -> None:
    histories = [conversation(n, result_words=150, fact="Note: " + "context words " * 60) for n in range(8, 80)]
    results = run_turns(histories, policy(**{**BOTH, "keep_recent_turns": 4}))
    both = [r for r in results if _cleared(r) and any(d.action == "checkpoint_reused" for d in r.decisions)]
    assert both, "a reused summary and cleared results after it in the same request"
    for r in results:
        compacted = [d for d in r.decisions if d.action == "compacted"]
        assert not (compacted and _cleared(r)), "never clear results that the same request summarises"
    for r in both:
        assert not r.reverted and not tool_pairing_problems(r.assembled.messages)


def test_strategy_order_can_switch_clearing_off() -> None:
    result = assemble(make_ctx(conversation(28)), policy(**BOTH, strategies=["summarize"]))
    assert not _cleared(result)
    assert [d.action for d in result.decisions] == ["compacted"]
