"""With cache accounting off the simulator reports the same prompt tokens, from the memoised counter."""

from __future__ import annotations

import orjson

import gateway  # noqa: F401  (offline tiktoken)
from benchmarks.profiles import build_profiles
from gateway.providersim.app import Simulator


def test_prompt_tokens_agree_with_and_without_cache() -> None:
    for profile in build_profiles(("tiny", "agent14k")):
        body = orjson.loads(profile.body)
        with_cache = Simulator(cache=True).usage(body)
        without = Simulator(cache=False).usage(body)
        assert without["prompt_tokens"] == with_cache["prompt_tokens"] == profile.tokens
        assert without["prompt_tokens_details"]["cached_tokens"] == 0
