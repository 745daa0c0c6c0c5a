"""``transcript_text``: the transcript of a long history, rendered per chunk and kept, always equal to
``render_transcript`` (what recall checks passages against), on real agent loops and when a call leaves."""

from __future__ import annotations

from typing import Any

import pytest

from gateway.history_fold import CHUNK
from gateway.summarize.transcript import render_transcript, transcript_text
from tests.shared_data import data_rows

LOOPS = ["agent_loops/mini_swe_agent_deepseek.jsonl"]  # the repo's tau2 runs are a chunk long or less


@pytest.mark.parametrize("name", LOOPS)
def test_every_prefix_of_a_real_loop_renders_as_the_whole_history_does(name: str) -> None:
    """The same message objects grown turn by turn, as a resent history is: the kept chunks are found again."""
    run = max(data_rows(name), key=lambda r: len(r["messages"]))
    messages: list[dict[str, Any]] = run["messages"]
    assert len(messages) > 3 * CHUNK
    for end in range(1, len(messages) + 1, 7):
        prefix = tuple(messages[:end])
        assert transcript_text(prefix) == render_transcript(prefix), f"{name} at {end} messages"


def _history() -> list[dict[str, Any]]:
    """System, task, a note, then rounds whose call at message 31 is answered at message 32 (the next chunk)."""
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "You fix bugs."},
        {"role": "user", "content": "Fix the test."},
        {"role": "user", "content": "It fails on CI."},
    ]
    for k in range(60):
        call = {"id": f"c{k}", "type": "function", "function": {"name": f"tool_{k}", "arguments": "{}"}}
        messages += [
            {"role": "assistant", "content": f"Step {k}.", "tool_calls": [call]},
            {"role": "tool", "tool_call_id": f"c{k}", "content": f"result {k}"},
        ]
    return messages


def test_a_result_whose_call_left_the_history_is_named_as_the_whole_history_names_it() -> None:
    messages = _history()
    assert messages[31]["tool_calls"][0]["id"] == messages[32]["tool_call_id"]
    assert transcript_text(messages) == render_transcript(messages)
    assert "tool tool_14: result 14" in transcript_text(messages)
    replaced = [{"role": "user", "content": f"note {i}"} for i in range(CHUNK)] + messages[CHUNK:]
    assert replaced[CHUNK] is messages[CHUNK], "the second chunk is the same objects at the same place"
    assert transcript_text(replaced) == render_transcript(replaced)
    assert "tool result: result 14" in transcript_text(replaced), "its call is gone: no name"
