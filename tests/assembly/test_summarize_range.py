"""summarize_range: ids that only label a templated reply are not facts a summary owes."""

from __future__ import annotations

from gateway.assembly.compaction_policy import CompactionPolicy
from gateway.assembly.summarize_range import summarize_range
from gateway.tokens import counter_for

COUNTER = counter_for("o200k_base")


def _chat(turns: int) -> list[dict[str, str]]:
    out = [{"role": "system", "content": "You help a warehouse manager."}]
    for k in range(turns):
        said = f"The locker code for site {k + 1} is ZX-{1000 + k}D." if k % 2 else "Long day, nothing new."
        out.append({"role": "user", "content": said})
        out.append({"role": "assistant", "content": f"Simulated answer {(k * 2654435761) % 16**8:08x} to: {said}"})
    return out


def test_template_ids_are_neither_required_nor_listed_as_dropped() -> None:
    messages = _chat(20)
    policy = CompactionPolicy(summary_max_tokens=300, summarizer_input_tokens=4000)
    result = summarize_range(messages, 1, len(messages), None, None, policy, COUNTER)
    summary = result.checkpoint.summary
    assert all(f"ZX-{1000 + k}D" in summary for k in range(1, 20, 2))
    assert "Simulated answer" not in summary and "also mentioned" not in summary
    assert result.dropped == ()


def test_a_fact_the_kept_rounds_still_say_leaves_room_for_one_they_do_not() -> None:
    """Issue 40, session 38: the summary of an aged range sits before the rounds compaction keeps; a fact
    those rounds say again word for word is in the request already, so the summary's room goes to one
    nothing else carries (before, the first code won the one line and the second was lost)."""
    messages = [
        {"role": "system", "content": "You help a warehouse manager."},
        {"role": "user", "content": "The locker code for site 1 is ZX-1111D."},
        {"role": "assistant", "content": "Noted."},
        {"role": "user", "content": "The locker code for site 2 is ZX-2222D."},
        {"role": "assistant", "content": "Noted."},
        {"role": "user", "content": "Reminder: the locker code for site 1 is ZX-1111D, site 3 is ZX-3333D."},
        {"role": "assistant", "content": "Noted."},
    ]
    policy = CompactionPolicy(summary_max_tokens=16, summarizer_input_tokens=4000)
    result = summarize_range(messages, 1, 5, None, None, policy, COUNTER)
    summary = result.checkpoint.summary
    assert "ZX-2222D" in summary and "ZX-1111D" not in summary, summary
    assert "ZX-1111D" not in result.dropped  # the kept rounds carry it: not lost
