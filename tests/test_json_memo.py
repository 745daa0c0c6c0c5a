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


def test_kept_keys_cost_their_length_not_orjsons_buffer() -> None:
    """orjson's result holds its ~16 KB output buffer; a memo keeping it as a key would hold that."""
    import tracemalloc

    @memo_by_json(limit=1_000)
    def size(value: Any) -> int:
        return len(value["text"])

    values = [{"text": f"tool {i}: " + "y" * 1_000} for i in range(300)]
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        for v in values:
            size(v)
        kept = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert kept < 3 * 300 * 1_020, f"{kept} bytes kept for 300 keys of ~1 KB"
