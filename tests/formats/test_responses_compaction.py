"""What a Responses compaction keeps (pure): the newest calls survive a tail too big to hold them."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest

from gateway.errors import RequestError
from gateway.formats.responses_compaction import compaction_triggered, newest_round_kept, split_items, without_users


def _tokens(item: Mapping[str, Any]) -> int:
    return len(str(item.get("output") or item.get("content") or item.get("arguments") or "")) // 4 + 1


def _short(call: Mapping[str, Any], output: Mapping[str, Any]) -> dict[str, Any]:
    return {**output, "output": f"[{call.get('name')} cleared]"}


ITEMS: list[dict[str, Any]] = [
    {"type": "message", "role": "user", "content": "context"},
    {"type": "message", "role": "user", "content": "Create note.txt and read it back."},
    {"type": "function_call", "call_id": "w", "name": "exec", "arguments": "seq 1 1500 > note.txt"},
    {"type": "function_call_output", "call_id": "w", "output": ""},
    {"type": "function_call", "call_id": "r", "name": "exec", "arguments": "cat note.txt"},
    {"type": "function_call_output", "call_id": "r", "output": "\n".join(map(str, range(1500)))},
]


def test_the_newest_call_is_kept_with_its_output_shortened_when_the_tail_cannot_hold_it() -> None:
    split = split_items(ITEMS, 100, _tokens)
    assert not split.tail, "the 1,500-line output alone is over the room"
    kept = newest_round_kept(split, _short)
    assert [i.get("call_id") for i in kept.tail] == ["r", "r"]
    assert kept.tail[1]["output"] == "[exec cleared]"
    assert kept.middle == split.middle[:-2] and kept.task == split.task


def test_a_tail_that_holds_a_call_is_left_alone() -> None:
    split = split_items(ITEMS[:4], 1000, _tokens)
    assert newest_round_kept(split, _short) == split


def test_the_trigger_must_come_last_and_users_are_left_to_the_client() -> None:
    assert compaction_triggered({"input": [*ITEMS, {"type": "compaction_trigger"}]})
    assert not compaction_triggered({"input": ITEMS}) and not compaction_triggered({"input": "hi"})
    with pytest.raises(RequestError) as err:
        compaction_triggered({"input": [{"type": "compaction_trigger"}, *ITEMS]})
    assert err.value.param == "input[0]"
    assert [i["type"] for i in without_users(ITEMS)] == ["function_call", "function_call_output"] * 2
