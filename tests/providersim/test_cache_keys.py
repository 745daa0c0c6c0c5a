"""The simulator accounts ``prompt_cache_key`` as OpenAI routes it: one cache per key, none shared across keys."""

from __future__ import annotations

from typing import Any

import gateway  # noqa: F401  (offline tiktoken)
from gateway.providersim.app import Simulator

LONG = "You are a careful support agent for a telecom operator. " * 120  # ~1,300 tokens: cacheable


def _body(key: str | None, question: str) -> dict[str, Any]:
    body: dict[str, Any] = {
        "model": "gpt-4o-mini",
        "messages": [{"role": "system", "content": LONG}, {"role": "user", "content": question}],
    }
    if key is not None:
        body["prompt_cache_key"] = key
    return body


def _cached(sim: Simulator, body: dict[str, Any]) -> int:
    return int(sim.usage(body)["prompt_tokens_details"]["cached_tokens"])


def test_a_key_reads_only_its_own_cache() -> None:
    sim = Simulator(cache=True)
    assert _cached(sim, _body("session-a", "first question")) == 0
    assert _cached(sim, _body("session-a", "second question")) > 1000, "same key: the prefix is read"
    assert _cached(sim, _body("session-b", "third question")) == 0, "another key is routed to another cache"
    assert _cached(sim, _body(None, "fourth question")) == 0, "no key: the model's shared cache, still cold"
    assert _cached(sim, _body(None, "fifth question")) > 1000


def test_keyed_caches_stay_bounded(monkeypatch: Any) -> None:
    from gateway.providersim import app

    monkeypatch.setattr(app, "MAX_KEYED_CACHES", 3)
    sim = Simulator(cache=True)
    for n in range(10):
        sim.usage(_body(f"k{n}", "q"))
    assert len(sim.caches) == 3
