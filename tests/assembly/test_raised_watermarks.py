"""Raised watermarks (issue 34): a threshold raised over what a compaction can land at stays where the head puts it.

Before session 37 the raised threshold was the landing floor plus the target-to-threshold band. The floor counts
the newest round, so the threshold moved with every round's size, and a small round after a large one lowered it
under a request that had only grown by that round: a compaction came a turn or two after the last.
"""

from __future__ import annotations

from gateway.assembly.compaction_layout import for_head, layout, token_limit, watermarks
from gateway.assembly.compaction_policy import for_window
from gateway.assembly.policy import Policy
from gateway.assembly.verify_assembly import tool_pairing_problems
from tests.assembly.compaction_helpers import COUNTER, rewrites, run_turns
from tests.assembly.test_fit_plan import _histories, coding_loop


def test_a_raised_threshold_does_not_move_with_the_newest_rounds_size() -> None:
    """A coding agent reading files of 1-4K tokens at 16K: every turn whose watermarks are raised has the same
    threshold (before: as many thresholds as round sizes, 17 rewrites on this run for a bound of 20.6)."""
    window = 16_384
    histories = _histories(coding_loop(40, seed=1))
    results = run_turns(histories, Policy(), window=window, prepare_ahead=True)
    policy = for_window(Policy().compaction, window)
    raised = set()
    for result in results:
        ctx = result.original
        lay = layout(ctx.messages, policy, COUNTER)
        if lay is None or not lay.has_middle:
            continue
        marks = watermarks(ctx, lay, for_head(ctx, lay, policy))
        if marks.threshold > token_limit(ctx, policy.threshold):
            raised.add(marks.threshold)
    assert raised, "the 1-4K rounds raise the watermarks on this run"
    assert len(raised) == 1, f"the raised threshold moved from turn to turn: {sorted(raised)}"
    assert all(r.assembled.prompt_tokens() <= window for r in results)
    assert not any(tool_pairing_problems(r.assembled.messages) for r in results)
    growth = COUNTER.messages(histories[-1]) - COUNTER.messages(histories[0])
    assert len(rewrites(results)) <= growth / ((0.55 - 0.25) * window)
