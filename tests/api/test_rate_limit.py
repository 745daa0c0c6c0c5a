"""Per-key rate limiting: a token bucket per caller hash, 429 with retry-after in the OpenAI shape."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import openai
import pytest
from hypothesis import given
from hypothesis import strategies as st

from gateway.api.app import create_app
from gateway.api.rate_limit import RateLimiter
from gateway.config import parse_settings
from gateway.errors import RateLimited
from tests.inproc import serve_in_thread
from tests.procs import SimHandle, sim_models


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_bucket_admits_the_burst_then_refuses_until_a_token_refills() -> None:
    clock = Clock()
    limiter = RateLimiter(per_minute=60, burst=3, clock=clock)
    assert [limiter.take("a") for _ in range(3)] == [0.0, 0.0, 0.0]
    assert limiter.take("a") == pytest.approx(1.0)
    clock.now += 0.5
    assert limiter.take("a") == pytest.approx(0.5)
    clock.now += 0.5
    assert limiter.take("a") == 0.0


def test_callers_have_separate_buckets() -> None:
    limiter = RateLimiter(per_minute=1, clock=Clock())
    limiter.admit("a")
    limiter.admit("b")
    with pytest.raises(RateLimited) as info:
        limiter.admit("a")
    assert info.value.status_code == 429
    assert info.value.headers["retry-after"] == "60"


def test_memory_stays_bounded_and_forgets_idle_callers_first() -> None:
    clock = Clock()
    limiter = RateLimiter(per_minute=60, burst=1, clock=clock, max_callers=10)
    limiter.take("busy")
    for i in range(50):
        clock.now += 0.001
        limiter.take(f"caller-{i}")
    assert len(limiter) <= 10


@given(st.lists(st.floats(min_value=0, max_value=30, allow_nan=False), min_size=1, max_size=200))
def test_never_admits_more_than_burst_plus_refill(gaps: list[float]) -> None:
    clock = Clock()
    start = clock.now
    limiter = RateLimiter(per_minute=120, burst=5, clock=clock)
    admitted = 0
    for gap in gaps:
        clock.now += gap
        admitted += limiter.take("k") == 0.0
        assert admitted <= 5 + (clock.now - start) * 2 + 1e-9


@given(st.integers(min_value=1, max_value=600), st.integers(min_value=1, max_value=50))
def test_a_refused_caller_admitted_after_waiting_the_returned_time(per_minute: int, burst: int) -> None:
    clock = Clock()
    limiter = RateLimiter(per_minute=per_minute, burst=burst, clock=clock)
    for _ in range(burst):
        assert limiter.take("k") == 0.0
    wait = limiter.take("k")
    assert wait > 0
    clock.now += wait * (1 + 1e-9)
    assert limiter.take("k") == 0.0


@pytest.fixture(scope="module")
def limited_url(sim: SimHandle) -> Iterator[str]:
    settings = parse_settings({"models": sim_models(sim.base_url), "limits": {"requests_per_minute": 2}})
    with serve_in_thread(create_app(settings)) as url:
        yield url + "/v1"


def test_third_request_in_a_minute_is_a_429_with_retry_after(limited_url: str) -> None:
    client = openai.OpenAI(base_url=limited_url, api_key="sk-third", max_retries=0)
    messages = [{"role": "user", "content": "hello"}]
    for _ in range(2):
        client.chat.completions.create(model="gpt-4o-mini", messages=messages)
    with pytest.raises(openai.RateLimitError) as info:
        client.chat.completions.create(model="gpt-4o-mini", messages=messages)
    response = info.value.response
    assert 1 <= int(response.headers["retry-after"]) <= 30
    assert response.json()["error"]["code"] == "rate_limit_exceeded"
    assert "2 requests per minute" in response.json()["error"]["message"]
    exposition = httpx.get(limited_url[: -len("/v1")] + "/metrics").text
    assert 'ventana_rejected_requests_total{code="rate_limit_exceeded"}' in exposition


def test_another_key_is_not_limited_by_the_first(limited_url: str) -> None:
    body = {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "hi"}]}
    for _ in range(2):
        assert httpx.post(
            limited_url + "/chat/completions", json=body, headers={"authorization": "Bearer sk-x"}
        ).is_success
    r = httpx.post(limited_url + "/chat/completions", json=body, headers={"authorization": "Bearer sk-y"})
    assert r.status_code == 200
