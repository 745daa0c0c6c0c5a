"""Pass metrics come from the decision records alone, whatever pass wrote them."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from gateway.decision_tally import OTHER, VOCABULARY, compacted, safe_label, tally_decisions, undone


def _d(name: str, action: str, before: int = 0, after: int = 0, **detail: Any) -> dict[str, Any]:
    return {"pass": name, "action": action, "tokens_before": before, "tokens_after": after, "detail": detail}


def test_counts_the_named_events_of_the_vocabulary() -> None:
    tally = tally_decisions(
        [
            _d("prune_tools", "pruned", 900, 300, kept=["a"], removed=["b", "c", "d"]),
            _d("prune_tools", "tool_set_changed", added=["a"], removed=["z"]),
            _d("compact_history", "compacted", 5000, 800, summarizer="llm", summarizer_calls=2, reused=False),
            _d("compact_history", "summarizer_failed"),
            _d("lint_context", "finding", check="volatile_in_prefix", severity="error"),
            _d("lint_context", "finding", check="volatile_in_prefix", severity="error"),
            _d("render_reminder", "rendered", 0, 40),
        ]
    )
    assert tally.tools_pruned == 3
    assert tally.tool_set_changes == 1
    assert (tally.compactions, tally.summarizer_calls, tally.summarizer_failures) == (1, 2, 1)
    assert tally.lint_findings == {("volatile_in_prefix", "error"): 2}
    assert tally.tokens_saved == {"prune_tools": 600, "compact_history": 4200}
    assert tally.tokens_added == {"render_reminder": 40}
    assert tally.actions[("lint_context", "finding")] == 2


def test_a_first_tool_set_is_no_change_and_a_search_expansion_is_one() -> None:
    tally = tally_decisions(
        [
            _d("prune_tools", "tool_set_changed", added=["a", "b"], removed=[], first=True),
            _d("find_tools", "expanded", 300, 420, query="set a timer", added=["set_timer"]),
        ]
    )
    assert tally.tool_set_changes == 1
    assert tally.tokens_added == {"find_tools": 120}


def test_removed_may_be_a_count_instead_of_names() -> None:
    assert tally_decisions([_d("prune_tools", "pruned", 10, 5, removed=7)]).tools_pruned == 7


def test_unknown_pass_is_counted_without_an_edit() -> None:
    tally = tally_decisions([_d("rerank_documents", "reranked", 120, 100)])
    assert tally.actions == {("rerank_documents", "reranked"): 1}
    assert tally.tokens_saved == {"rerank_documents": 20}


def test_free_text_never_becomes_a_label() -> None:
    tally = tally_decisions([_d("lint_context", "finding", check="the user's secret: 42!", severity=None)])
    assert tally.lint_findings == {(OTHER, "warning"): 1}
    assert safe_label("x" * 65) == OTHER
    assert safe_label(None) == OTHER
    assert all(safe_label(name) == name for name in VOCABULARY)


def test_malformed_decisions_count_nothing_but_their_action() -> None:
    tally = tally_decisions(
        [{"pass": "compact_history", "action": "compacted", "detail": "oops", "tokens_before": "9"}]
    )
    assert tally.compactions == 1
    assert tally.summarizer_calls == 0
    assert not tally.tokens_saved and not tally.tokens_added


_decision = st.builds(
    _d,
    st.sampled_from(sorted(VOCABULARY)),
    st.sampled_from(["pruned", "compacted", "finding", "rendered", "moved"]),
    st.integers(0, 10_000),
    st.integers(0, 10_000),
)


@given(st.lists(_decision, max_size=30))
def test_saved_minus_added_is_the_net_saving(decisions: list[dict[str, Any]]) -> None:
    tally = tally_decisions(decisions)
    net = sum(d["tokens_before"] - d["tokens_after"] for d in decisions)
    assert sum(tally.tokens_saved.values()) - sum(tally.tokens_added.values()) == net
    assert sum(tally.actions.values()) == len(decisions)
    assert all(v > 0 for v in (*tally.tokens_saved.values(), *tally.tokens_added.values()))


def test_a_sessions_first_tool_set_is_not_a_change() -> None:
    first = _d("prune_tools", "tool_set_changed", added=["a", "b"], removed=[], first=True)
    assert tally_decisions([first]).tool_set_changes == 0
    assert tally_decisions([first]).actions[("prune_tools", "tool_set_changed")] == 1, "the decision is still counted"


def test_decisions_a_revert_undid_count_no_tokens_and_no_compaction() -> None:
    """Before: a reverted turn's compaction counted as a compaction and its tokens as saved."""
    tally = tally_decisions(
        [
            _d("clear_tool_results", "cleared", 3000, 100),
            _d("compact_history", "compacted", 5000, 800, summarizer_calls=1),
            _d("verify_assembly", "reverted", problems=["x"]),
            _d("render_reminder", "rendered", 0, 40),  # after the revert: it went out
        ]
    )
    assert tally.compactions == 0 and tally.reverted == 1
    assert tally.summarizer_calls == 1  # the call was made and billed all the same
    assert tally.tokens_saved == {} and tally.tokens_added == {"render_reminder": 40}
    assert tally.actions[("compact_history", "compacted")] == 1


def test_a_revert_naming_passes_undoes_only_theirs() -> None:
    decisions = [
        _d("prune_tools", "pruned", 900, 300, removed=["b"]),
        _d("compact_history", "compacted", 5000, 800),
        _d("fit_plan", "reverted", undoes=["compact_history"]),
    ]
    assert undone(decisions) == {1}
    tally = tally_decisions(decisions)
    assert tally.tools_pruned == 1 and tally.compactions == 0
    assert compacted(decisions) is False
    assert compacted(decisions[:2]) is True


def test_a_fallback_that_keeps_its_stage_counts_the_stage_once() -> None:
    """The revert states the whole request (client's 20,000 tokens, 1,300 sent); the kept stage's decisions
    already count that change. Before: the revert's own 18,700 were counted again (issue 37's +5 %)."""
    decisions = [
        _d("compact_history", "compacted", 20_000, 1_300, summarizer_calls=1),
        _d("verify_assembly", "reverted", 20_000, 1_300, undoes=[]),
    ]
    tally = tally_decisions(decisions)
    assert tally.tokens_saved == {"compact_history": 18_700} and tally.tokens_added == {}
    assert tally.compactions == 1 and tally.reverted == 1 and compacted(decisions)


def test_a_revert_to_the_clients_request_moves_no_tokens() -> None:
    decisions = [_d("compact_history", "compacted", 9_000, 3_000), _d("verify_assembly", "reverted", 9_000, 9_000)]
    tally = tally_decisions(decisions)
    assert sum(tally.tokens_saved.values()) == sum(tally.tokens_added.values()) == 0
