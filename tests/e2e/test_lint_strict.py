"""Strict lint over real HTTP: a context that fails the gate is answered 400 naming the check."""

from __future__ import annotations

import time
from collections.abc import Iterator

import openai
import pytest

from gateway.api.app import create_app
from gateway.config import parse_settings
from gateway.store.record import MemoryRecorder
from tests.inproc import serve_in_thread
from tests.procs import GatewayHandle, SimHandle, run_gateway, sim_models

CLOCK = [
    {"role": "system", "content": "Current time: 2026-11-29T10:00:00Z\nYou are terse."},
    {"role": "user", "content": "hi"},
]


@pytest.fixture(scope="module")
def strict_raw_gateway(sim: SimHandle, tmp_path_factory: pytest.TempPathFactory) -> Iterator[GatewayHandle]:
    """Strict lint with move_volatile off: the clock stays in the prefix."""
    policy = {"lint": {"mode": "strict"}, "volatile": {"enabled": False}}
    with run_gateway(
        tmp_path_factory.mktemp("gw-strict"), {"models": sim_models(sim.base_url), "policy": policy}
    ) as gw:
        yield gw


def test_strict_rejects_with_400_naming_the_check(strict_raw_gateway: GatewayHandle, sim: SimHandle) -> None:
    before = len(sim.received())
    client = openai.OpenAI(base_url=strict_raw_gateway.base_url, api_key="sk-x", max_retries=0)
    with pytest.raises(openai.BadRequestError) as info:
        client.chat.completions.create(model="gpt-4o-mini", messages=CLOCK)
    error = info.value.body
    assert error["code"] == "context_lint_failed"
    assert error["param"] == "volatile_in_prefix"
    assert "volatile_in_prefix" in error["message"]
    assert len(sim.received()) == before, "a rejected request must not reach the provider"


def test_strict_lets_a_clean_context_through(strict_raw_gateway: GatewayHandle) -> None:
    client = openai.OpenAI(base_url=strict_raw_gateway.base_url, api_key="sk-x", max_retries=0)
    answer = client.chat.completions.create(
        model="gpt-4o-mini",
        messages=[{"role": "system", "content": "You are terse."}, {"role": "user", "content": "hi"}],
    )
    assert answer.choices[0].message.content


def test_warn_mode_forwards_the_same_request(default_gateway: GatewayHandle) -> None:
    client = openai.OpenAI(base_url=default_gateway.base_url, api_key="sk-x", max_retries=0)
    assert client.chat.completions.create(model="gpt-4o-mini", messages=CLOCK).choices[0].message.content


def test_warn_mode_records_the_findings_made_after_the_answer(sim: SimHandle) -> None:
    """In warn mode lint runs after the answer; its findings still reach the record, streamed or not."""
    settings = parse_settings({"models": sim_models(sim.base_url), "policy": {"volatile": {"enabled": False}}})
    recorder = MemoryRecorder()
    with serve_in_thread(create_app(settings, recorder=recorder)) as url:
        client = openai.OpenAI(base_url=url + "/v1", api_key="sk-x", max_retries=0)
        client.chat.completions.create(model="gpt-4o-mini", messages=CLOCK)
        list(client.chat.completions.create(model="gpt-4o-mini", messages=CLOCK, stream=True))
        deadline = time.monotonic() + 5
        while len(recorder.records) < 2 and time.monotonic() < deadline:
            time.sleep(0.02)
    for record in list(recorder.records)[-2:]:
        checks = [d["detail"].get("check") for d in record.decisions if d["pass"] == "lint_context"]
        assert "volatile_in_prefix" in checks, record.decisions
