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
