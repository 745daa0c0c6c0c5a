"""The benchmark's agent profiles have the sizes issue 11 names, built from real ToolBench runs."""

from __future__ import annotations

import orjson

import gateway  # noqa: F401  (offline tiktoken)
from benchmarks.profiles import build_profiles
from gateway.api.validate import validate_chat_request


def test_profiles_have_the_named_sizes_and_are_valid_requests() -> None:
    profiles = {p.name: p for p in build_profiles()}
    small, large = profiles["agent14k"], profiles["agent105k"]
    assert small.messages == 37 and 14_000 <= small.tokens < 15_000
    assert large.messages == 287 and 105_000 <= large.tokens < 110_000
    for profile in profiles.values():
        body = orjson.loads(profile.body)
        validate_chat_request(body, max_messages=5_000)
        assert bool(body.get("stream")) == profile.stream
    assert len(orjson.loads(small.body)["tools"]) == 20
