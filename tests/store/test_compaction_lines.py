"""compaction_lines: one line for a request's clearing, one per summary, with rounds and tools."""

from __future__ import annotations

from gateway.store.compaction_lines import MAX_NAMED_RESULTS, compaction_lines


def _cleared(i: int, tool: str = "read_file", **extra: object) -> dict:
    detail = {"tool": tool, "message_index": i, "round": i - 1, **extra}
    return {
        "pass": "clear_tool_results",
        "action": "cleared",
        "tokens_before": 300,
        "tokens_after": 20,
        "detail": detail,
    }


def test_all_cleared_results_of_a_request_are_one_line_by_tool_and_message() -> None:
    decisions = [_cleared(5), _cleared(7, "bash"), {"pass": "render_reminder", "action": "rendered"}, _cleared(9)]
    assert compaction_lines(decisions) == [
        (
            "cleared",
            "cleared 3 tool results in the rounds at messages 4-8: read_file #5, bash #7, read_file #9"
            " (840 tokens saved)",
        )
    ]


def test_a_long_clearing_names_the_first_results_and_counts_the_rest() -> None:
    decisions = [_cleared(i, input_cleared=True) for i in range(3, 3 + 2 * (MAX_NAMED_RESULTS + 3), 2)]
    ((_, line),) = compaction_lines(decisions)
    assert line.count("read_file #") == MAX_NAMED_RESULTS and "and 3 more; arguments of 15 calls too" in line


def test_a_summary_names_its_rounds_and_counts_the_calls_per_tool() -> None:
    detail = {"start": 2, "end": 40, "round_numbers": [3, 17], "tool_counts": {"read_file": 9, "bash": 6}}
    compacted = {"pass": "compact_history", "action": "compacted", "tokens_before": 9000, "tokens_after": 5000}
    reused = {"pass": "compact_history", "action": "checkpoint_reused", "detail": {"start": 2, "end": 40}}
    assert compaction_lines([{**compacted, "detail": detail}, reused]) == [
        ("summary", "rounds 3-17 (messages 2-39; read_file x9, bash x6) summarised, 4,000 tokens saved"),
        ("summary", "messages 2-39: summary resent, the same bytes as the previous turn"),
    ]


def test_decisions_recorded_before_round_details_still_read() -> None:
    old = {"pass": "compact_history", "action": "compacted", "detail": {"start": 2, "end": 9, "tools": ["f"]}}
    assert compaction_lines([old]) == [("summary", "messages 2-8; f summarised, 0 tokens saved")]
