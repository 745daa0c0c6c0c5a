"""memo_by_json: one call per distinct JSON value, bounded, and exact."""

from __future__ import annotations

from typing import Any

from gateway.json_memo import memo_by_json


def test_equal_values_are_computed_once_and_different_ones_apart() -> None:
    calls: list[Any] = []

    @memo_by_json(limit=10)
    def size(value: Any) -> int:
        calls.append(value)
        return len(str(value))

    assert size({"a": 1}) == size({"a": 1}) == len("{'a': 1}")
    assert size({"a": 2}) == len("{'a': 2}")
    assert len(calls) == 2  # a fresh but equal dict is a hit; a different one is not


def test_the_memo_is_cleared_past_its_limit_and_big_integers_are_not_memoised() -> None:
    calls: list[Any] = []

    @memo_by_json(limit=2)
    def same(value: Any) -> Any:
        calls.append(value)
        return value

    for v in (1, 2, 3, 1):
        same(v)
    assert calls == [1, 2, 3, 1]  # 3 cleared the memo, so 1 was computed again
    huge = 2**70
    assert same(huge) == huge and same(huge) == huge
    assert calls[-2:] == [huge, huge]  # orjson cannot encode it: computed every time, never wrong
