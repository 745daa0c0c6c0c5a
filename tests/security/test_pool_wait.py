"""Finding: the wait for a pooled upstream connection had no limit (200 slow streams made an
unrelated request wait 9 s). It is now bounded by ``upstream.pool_timeout_s``, with a clear
503 ``gateway_busy`` when it runs out, and a slot comes back however a stream ends."""

from __future__ import annotations

import asyncio
import gc
import time
from typing import Any

import pytest

from gateway.config import ModelConfig, UpstreamConfig
from gateway.errors import GatewayBusy
from gateway.upstream.openai_compat import OpenAICompatUpstream
from tests.procs import SimHandle

BODY = {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "hello"}], "stream": True}


def _model(sim: SimHandle) -> ModelConfig:
    return ModelConfig(name="gpt-4o-mini", litellm_model="openai/gpt-4o-mini", api_base=sim.base_url)


async def test_a_full_pool_answers_gateway_busy_after_the_wait_limit(sim: SimHandle) -> None:
    upstream = OpenAICompatUpstream(UpstreamConfig(max_connections=2, pool_timeout_s=0.3))
    model = _model(sim)
    try:
        held = [await upstream.open_stream(model, BODY, None) for _ in range(2)]
        with pytest.raises(GatewayBusy) as caught:
            await upstream.complete(model, {**BODY, "stream": False}, None)
        assert caught.value.status_code == 503 and caught.value.code == "gateway_busy"
        assert "upstream.pool_timeout_s" in caught.value.message
        await held.pop().aclose()  # a stream closed by its reader gives its slot back
        assert (await upstream.complete(model, {**BODY, "stream": False}, None))["choices"]
        del held[:]  # a stream nobody closed gives it back when it is collected
        gc.collect()
        again = [await upstream.open_stream(model, BODY, None) for _ in range(2)]  # both slots free
        for stream in again:
            await stream.aclose()
    finally:
        await upstream.close()


async def test_a_provider_whose_streams_fill_its_pool_does_not_delay_another(sim: SimHandle) -> None:
    """Issue 35: one connection count covered every upstream, so a request to another provider waited
    4.1 s behind 200 slow streams. Each upstream (api_base) now has its own slots."""
    upstream = OpenAICompatUpstream(UpstreamConfig(max_connections=2, pool_timeout_s=0.3))
    slow = _model(sim)
    port = sim.base_url.rsplit(":", 1)[1]
    other = ModelConfig(name="other", litellm_model="openai/gpt-4o-mini", api_base=f"http://localhost:{port}")
    try:
        held = [await upstream.open_stream(slow, BODY, None) for _ in range(2)]  # the slow provider's slots, all held
        with pytest.raises(GatewayBusy):
            await upstream.complete(slow, {**BODY, "stream": False}, None)
        started = time.perf_counter()
        assert (await upstream.complete(other, {**BODY, "stream": False}, None))["choices"]
        assert time.perf_counter() - started < 0.3, "the other provider waited for the slow one's slots"
        for stream in held:
            await stream.aclose()
    finally:
        await upstream.close()


async def test_a_free_slot_is_taken_at_once_and_only_a_full_pool_waits_with_the_limit(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A free slot costs no ``wait_for`` (a task and a timer, two loop turns on every request's path);
    a full pool still waits at most ``pool_timeout_s``."""
    upstream = OpenAICompatUpstream(UpstreamConfig(max_connections=2, pool_timeout_s=0.3))
    model = ModelConfig(name="m", litellm_model="openai/m", api_base="http://127.0.0.1:9/v1")
    timed: list[float] = []
    real_wait_for = asyncio.wait_for

    def counting(awaitable: Any, timeout: float) -> Any:
        timed.append(timeout)
        return real_wait_for(awaitable, timeout)

    monkeypatch.setattr(asyncio, "wait_for", counting)
    releases = [await upstream._slot(model) for _ in range(2)]
    assert timed == []
    with pytest.raises(GatewayBusy):
        await upstream._slot(model)
    assert timed == [0.3]
    releases.pop()()
    releases.append(await upstream._slot(model))
    assert timed == [0.3]
    for release in releases:
        release()
