"""Pass-through mode: the client's provider key is forwarded upstream and never stored, logged or returned."""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator

import openai
import orjson
import pytest

from gateway.api.app import create_app
from gateway.api.auth import hash_key
from gateway.config import parse_settings
from gateway.store.jsonl_recorder import record_to_dict
from gateway.store.record import MemoryRecorder
from gateway.upstream.router import REDACTED
from tests.inproc import serve_in_thread
from tests.procs import SimHandle, sim_models

PROVIDER_KEY = "sk-proj-PASSTHROUGH-7d1e9b2c4a"
GATEWAY_KEY = "vk-gateway-0b5f"


@pytest.fixture(scope="module")
def gateway(sim: SimHandle) -> Iterator[tuple[str, MemoryRecorder]]:
    auth = {"enabled": True, "passthrough": True, "keys": [hash_key(GATEWAY_KEY)]}
    recorder = MemoryRecorder()
    app = create_app(parse_settings({"models": sim_models(sim.base_url), "auth": auth}), recorder=recorder)
    with serve_in_thread(app) as url:
        yield url + "/v1", recorder


def _client(url: str, **headers: str) -> openai.OpenAI:
    return openai.OpenAI(base_url=url, api_key=PROVIDER_KEY, max_retries=0, default_headers=headers)


def test_provider_key_reaches_the_provider_and_no_record_or_log_line(
    gateway: tuple[str, MemoryRecorder], sim: SimHandle, caplog: pytest.LogCaptureFixture
) -> None:
    url, recorder = gateway
    client = _client(url, **{"X-Ventana-Key": GATEWAY_KEY})
    messages = [{"role": "user", "content": "keep my key secret"}]
    before = len(recorder.records)
    with caplog.at_level(logging.DEBUG):
        client.chat.completions.create(model="gpt-4o-mini", messages=messages)
        list(client.chat.completions.create(model="gpt-4o-mini", messages=messages, stream=True))
        sim.faults({"kind": "echo_key", "times": 2})
        with pytest.raises(openai.AuthenticationError) as plain:
            client.chat.completions.create(model="gpt-4o-mini", messages=messages)
        with pytest.raises(openai.AuthenticationError) as streamed:
            client.chat.completions.create(model="gpt-4o-mini", messages=messages, stream=True)
    # The provider quoted the exact key it received (so it was forwarded); the client sees it redacted.
    for info in (plain, streamed):
        assert REDACTED in info.value.message and PROVIDER_KEY not in info.value.response.text
    records = list(recorder.records)[before:]
    assert [r.status for r in records] == [200, 200, 401, 401]
    assert all(REDACTED in (r.error or "") for r in records[2:])
    stored = b"".join(orjson.dumps(record_to_dict(r)) for r in records)
    assert PROVIDER_KEY.encode() not in stored and GATEWAY_KEY.encode() not in stored
    assert caplog.records, "nothing was logged: the log check would prove nothing"
    assert PROVIDER_KEY not in caplog.text and GATEWAY_KEY not in caplog.text


def test_without_the_gateway_key_the_provider_key_alone_is_refused(gateway: tuple[str, MemoryRecorder]) -> None:
    url, recorder = gateway
    before = len(recorder.records)
    with pytest.raises(openai.AuthenticationError) as info:
        _client(url).chat.completions.create(model="gpt-4o-mini", messages=[{"role": "user", "content": "hi"}])
    assert "x-ventana-key" in info.value.message
    # The refusal is recorded (docs/store.md: refusals), without the key it was refused with.
    deadline = time.monotonic() + 5
    while len(recorder.records) == before and time.monotonic() < deadline:
        time.sleep(0.05)
    (refusal,) = list(recorder.records)[before:]
    assert refusal.status == 401 and refusal.original == {} and "x-ventana-key" in (refusal.error or "")
    assert PROVIDER_KEY.encode() not in orjson.dumps(record_to_dict(refusal))


def test_the_gateways_own_provider_key_is_never_returned_or_recorded(
    sim: SimHandle, monkeypatch: pytest.MonkeyPatch
) -> None:
    secret = "sk-gateway-env-3e8a61f0"
    monkeypatch.setenv("VENTANA_TEST_PROVIDER_KEY", secret)
    recorder = MemoryRecorder()
    models = sim_models(sim.base_url, api_key_env="VENTANA_TEST_PROVIDER_KEY")
    with serve_in_thread(create_app(parse_settings({"models": models}), recorder=recorder)) as url:
        sim.faults({"kind": "echo_key", "times": 1})
        client = openai.OpenAI(base_url=url + "/v1", api_key="sk-client", max_retries=0)
        with pytest.raises(openai.AuthenticationError) as info:
            client.chat.completions.create(model="gpt-4o-mini", messages=[{"role": "user", "content": "hi"}])
    assert REDACTED in info.value.message and secret not in info.value.response.text
    assert secret.encode() not in orjson.dumps(record_to_dict(recorder.records[-1]))
