"""Provider faults beyond tests/e2e/test_errors.py: each ends in a clear OpenAI-shaped error or a retried answer.

Retries are counted at the simulator (every request that reached it is in its JSONL
record; connections the cutter closed never reach it). A stream is never retried once
a chunk went to the client, and the gateway process stays up through all of it.
"""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import openai
import pytest

from tests.procs import GatewayHandle, SimHandle, run_gateway, run_simulator, sim_models

MESSAGES = [{"role": "user", "content": "tell me something in quite a few words please"}]
UPSTREAM = {"timeout_s": 2.0, "max_retries": 2, "retry_backoff_s": 0.01}


@pytest.fixture(scope="module")
def cut_sim(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SimHandle]:
    with run_simulator(tmp_path_factory.mktemp("sim-cut"), cut=True) as handle:
        yield handle


def _gateway(sim: SimHandle, tmp: pytest.TempPathFactory, name: str, **upstream: object) -> Iterator[GatewayHandle]:
    assert sim.cut_base_url is not None
    config = {"models": sim_models(sim.cut_base_url), "upstream": {**UPSTREAM, **upstream}}
    with run_gateway(tmp.mktemp(name), config) as handle:
        yield handle


@pytest.fixture(scope="module")
def gw(cut_sim: SimHandle, tmp_path_factory: pytest.TempPathFactory) -> Iterator[GatewayHandle]:
    yield from _gateway(cut_sim, tmp_path_factory, "gw-faults")


@pytest.fixture(scope="module")
def no_retry_gw(cut_sim: SimHandle, tmp_path_factory: pytest.TempPathFactory) -> Iterator[GatewayHandle]:
    yield from _gateway(cut_sim, tmp_path_factory, "gw-no-retry", max_retries=0)


@pytest.fixture
def client(gw: GatewayHandle) -> Iterator[openai.OpenAI]:
    yield openai.OpenAI(base_url=gw.base_url, api_key="sk-faults", max_retries=0)
    assert gw.proc.poll() is None, "the gateway died"
    assert httpx.get(gw.url + "/healthz").status_code == 200


class Attempts:
    """How many requests reached the simulator since the block started."""

    def __init__(self, sim: SimHandle) -> None:
        self.sim = sim

    def __enter__(self) -> Attempts:
        self.start = len(self.sim.received())
        return self

    def __exit__(self, *exc: object) -> None:
        self.count = len(self.sim.received()) - self.start


def test_429_without_retry_after_is_passed_on_at_once(client: openai.OpenAI, cut_sim: SimHandle) -> None:
    cut_sim.faults({"kind": "status", "status": 429, "times": 1})
    with Attempts(cut_sim) as attempts, pytest.raises(openai.RateLimitError) as info:
        client.chat.completions.create(model="gpt-4o-mini", messages=MESSAGES)
    assert attempts.count == 1
    assert "retry-after" not in info.value.response.headers
    assert info.value.response.json()["error"]["code"] == "rate_limit_exceeded"


def test_429_with_a_short_retry_after_is_retried_and_answered(client: openai.OpenAI, cut_sim: SimHandle) -> None:
    cut_sim.faults({"kind": "status", "status": 429, "retry_after": "0.05", "times": 1})
    with Attempts(cut_sim) as attempts:
        got = client.chat.completions.create(model="gpt-4o-mini", messages=MESSAGES)
    assert attempts.count == 2
    assert got.choices[0].message.content.startswith("Simulated answer")


def test_500_once_is_retried_and_answered(client: openai.OpenAI, cut_sim: SimHandle) -> None:
    cut_sim.faults({"kind": "status", "status": 500, "times": 1})
    with Attempts(cut_sim) as attempts:
        got = client.chat.completions.create(model="gpt-4o-mini", messages=MESSAGES)
    assert attempts.count == 2
    assert got.choices[0].finish_reason == "stop"


def test_connection_closed_before_answering_is_retried(client: openai.OpenAI, cut_sim: SimHandle) -> None:
    cut_sim.faults({"kind": "close", "times": 1})
    with Attempts(cut_sim) as attempts:
        got = client.chat.completions.create(model="gpt-4o-mini", messages=MESSAGES)
    assert attempts.count == 1  # the closed attempt never reached the simulator's app
    assert got.choices[0].message.content.startswith("Simulated answer")


@pytest.mark.parametrize("stream", [False, True])
def test_connection_closed_past_the_retries_is_a_clear_502(
    client: openai.OpenAI, cut_sim: SimHandle, stream: bool
) -> None:
    cut_sim.faults({"kind": "close", "times": 3})
    with Attempts(cut_sim) as attempts, pytest.raises(openai.APIStatusError) as info:
        client.chat.completions.create(model="gpt-4o-mini", messages=MESSAGES, stream=stream)
    assert attempts.count == 0
    assert info.value.status_code == 502
    error = info.value.response.json()["error"]
    assert error["code"] == "upstream_unavailable" and "connection" in error["message"]


def test_stream_hang_before_the_first_byte_is_a_504(client: openai.OpenAI, cut_sim: SimHandle) -> None:
    cut_sim.faults({"kind": "hang", "seconds": 5, "times": 1})
    with Attempts(cut_sim) as attempts, pytest.raises(openai.APIStatusError) as info:
        client.chat.completions.create(model="gpt-4o-mini", messages=MESSAGES, stream=True)
    assert info.value.status_code == 504
    assert attempts.count == 1  # a read timeout is not retried: the provider may still be working on it


def test_a_dropped_stream_is_never_retried(client: openai.OpenAI, cut_sim: SimHandle) -> None:
    cut_sim.faults({"kind": "drop_stream", "times": 1})
    received: list[str] = []
    with Attempts(cut_sim) as attempts, pytest.raises(openai.APIError, match="dropped the stream"):
        for chunk in client.chat.completions.create(model="gpt-4o-mini", messages=MESSAGES, stream=True):
            received.extend(c.delta.content or "" for c in chunk.choices)
    assert attempts.count == 1
    assert "".join(received).startswith("Simulated answer")


def test_a_malformed_stream_chunk_ends_the_stream_with_an_error(client: openai.OpenAI, cut_sim: SimHandle) -> None:
    cut_sim.faults({"kind": "malformed", "times": 1})
    received: list[str] = []
    with pytest.raises(openai.APIError, match="not JSON"):
        for chunk in client.chat.completions.create(model="gpt-4o-mini", messages=MESSAGES, stream=True):
            received.extend(c.delta.content or "" for c in chunk.choices)
    assert "".join(received).startswith("Simulated answer")


def test_retries_are_configurable(no_retry_gw: GatewayHandle, cut_sim: SimHandle) -> None:
    client = openai.OpenAI(base_url=no_retry_gw.base_url, api_key="sk-faults", max_retries=0)
    cut_sim.faults({"kind": "status", "status": 503, "times": 1})
    with Attempts(cut_sim) as attempts, pytest.raises(openai.APIStatusError) as info:
        client.chat.completions.create(model="gpt-4o-mini", messages=MESSAGES)
    assert attempts.count == 1
    assert info.value.status_code == 502
    cut_sim.faults({"kind": "close", "times": 1})
    with pytest.raises(openai.APIStatusError) as closed:
        client.chat.completions.create(model="gpt-4o-mini", messages=MESSAGES)
    assert closed.value.status_code == 502
