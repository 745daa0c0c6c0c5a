"""The Responses benchmark compares like with like: its items translate back to the recorded messages."""

from __future__ import annotations

from typing import Any

import pytest

from benchmarks.responses_route import FILES, _runs, as_items
from gateway.formats.responses import chat_messages
from tests.shared_data import data_path


def _normal(message: dict[str, Any]) -> dict[str, Any]:
    """An assistant tool-call message with empty text: the translation writes no text (``None``)."""
    if message["role"] == "assistant" and message.get("tool_calls") and not message.get("content"):
        return {**message, "content": None}
    return message


@pytest.mark.parametrize("name", FILES)
def test_items_of_a_recorded_run_translate_back_to_its_messages(name: str) -> None:
    run = next(_runs(data_path(name), 1))
    messages = run["messages"]
    assert chat_messages(as_items(messages)) == [_normal(m) for m in messages]
