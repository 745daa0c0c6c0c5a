"""A big body with much unseen text is encoded in a worker thread; small ones stay on the loop."""

from __future__ import annotations

import threading

import gateway  # noqa: F401  (offline tiktoken)
from benchmarks.profiles import build_profiles
from gateway.edges.token_offload import OFFLOAD_BODY_BYTES, count_off_loop
from gateway.tokens import TokenCounter


class _ThreadNotingCounter(TokenCounter):
    def __init__(self) -> None:
        super().__init__("o200k_base")
        self.learned_in: list[int] = []

    def learn(self, texts) -> None:  # type: ignore[no-untyped-def]
        self.learned_in.append(threading.get_ident())
        super().learn(texts)


async def test_first_turn_of_a_long_agent_is_encoded_off_the_loop() -> None:
    import orjson

    profile = build_profiles(("agent105k",))[0]
    body = orjson.loads(profile.body)
    counter = _ThreadNotingCounter()
    moved = await count_off_loop(counter, body, len(profile.body))
    assert moved > 100_000
    assert counter.learned_in and counter.learned_in[0] != threading.get_ident()
    assert counter.missing(body["messages"], body["tools"]) == []
    assert await count_off_loop(counter, body, len(profile.body)) == 0  # next turn: all seen


async def test_a_session_that_grew_little_is_not_inspected() -> None:
    import orjson

    profile = build_profiles(("agent105k",))[0]
    body = orjson.loads(profile.body)
    counter = _ThreadNotingCounter()
    assert await count_off_loop(counter, body, len(profile.body), None) > 100_000
    fresh = _ThreadNotingCounter()  # nothing counted, but the session grew by 10 bytes
    assert await count_off_loop(fresh, body, len(profile.body) + 10, len(profile.body)) == 0
    assert fresh.learned_in == []


async def test_small_body_is_not_inspected() -> None:
    counter = _ThreadNotingCounter()
    body = {"model": "m", "messages": [{"role": "user", "content": "x" * 50_000}]}
    assert await count_off_loop(counter, body, OFFLOAD_BODY_BYTES - 1) == 0
    assert counter.learned_in == []
