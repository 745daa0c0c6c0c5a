"""Bad input gets a clear 4xx in the OpenAI error shape; provider faults are mapped faithfully."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import openai
import pytest

from tests.procs import GatewayHandle, SimHandle, run_gateway, sim_models


def _shape(response: httpx.Response) -> dict:
    body = response.json()
    assert set(body) == {"error"}
    assert set(body["error"]) == {"message", "type", "param", "code"}
    return body["error"]


@pytest.fixture(scope="module")
def tight_gateway(sim: SimHandle, tmp_path_factory: pytest.TempPathFactory) -> Iterator[GatewayHandle]:
    config = {
        "models": sim_models(sim.base_url),
        "limits": {"max_body_bytes": 20_000, "max_messages": 50},
        "upstream": {"timeout_s": 1.0, "max_retries": 1, "retry_backoff_s": 0.01},
    }
    with run_gateway(tmp_path_factory.mktemp("gw-tight"), config) as handle:
        yield handle


def _post(gw: GatewayHandle, **kwargs: object) -> httpx.Response:
    return httpx.post(gw.base_url + "/chat/completions", timeout=15, **kwargs)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("body", "param"),
    [
        ({"messages": [{"role": "user", "content": "hi"}]}, "model"),
        ({"model": "gpt-4o-mini"}, "messages"),
        ({"model": "gpt-4o-mini", "messages": []}, "messages"),
        ({"model": "gpt-4o-mini", "messages": [{"role": "wizard", "content": "hi"}]}, "messages[0].role"),
        ({"model": "gpt-4o-mini", "messages": [{"role": "user", "content": 42}]}, "messages[0].content"),
        ({"model": "gpt-4o-mini", "messages": [{"role": "tool", "content": "x"}]}, "messages[0].tool_call_id"),
        ({"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "hi"}], "temperature": 9}, "temperature"),
        (
            {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "hi"}], "tools": [{"type": "x"}]},
            "tools[0]",
        ),
    ],
)
def test_wrong_schema_names_the_field(tight_gateway: GatewayHandle, body: dict, param: str) -> None:
    r = _post(tight_gateway, json=body)
    assert r.status_code == 400
    error = _shape(r)
    assert error["param"] == param
    assert error["type"] == "invalid_request_error"


def test_malformed_json_is_a_400(tight_gateway: GatewayHandle) -> None:
    r = _post(
        tight_gateway, content=b'{"model": "gpt-4o-mini", "messages": [', headers={"content-type": "application/json"}
    )
    assert r.status_code == 400
    assert _shape(r)["code"] == "invalid_json"


def test_tool_result_without_its_call_is_a_400(tight_gateway: GatewayHandle) -> None:
    body = {
        "model": "gpt-4o-mini",
        "messages": [
            {"role": "user", "content": "hi"},
            {"role": "tool", "tool_call_id": "call_9", "content": "orphan"},
        ],
    }
    r = _post(tight_gateway, json=body)
    assert r.status_code == 400
    assert "call_9" in _shape(r)["message"]


def test_tool_call_without_its_result_is_a_400(tight_gateway: GatewayHandle) -> None:
    body = {
        "model": "gpt-4o-mini",
        "messages": [
            {"role": "user", "content": "hi"},
            {
                "role": "assistant",
                "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}],
            },
            {"role": "user", "content": "and?"},
        ],
    }
    r = _post(tight_gateway, json=body)
    assert r.status_code == 400
    assert "c1" in _shape(r)["message"]


def test_oversize_body_is_a_413(tight_gateway: GatewayHandle) -> None:
    body = {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "x" * 50_000}]}
    r = _post(tight_gateway, json=body)
    assert r.status_code == 413
    assert _shape(r)["code"] == "request_too_large"


def test_too_many_messages_is_a_400(tight_gateway: GatewayHandle) -> None:
    body = {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "x"}] * 51}
    r = _post(tight_gateway, json=body)
    assert r.status_code == 400
    assert _shape(r)["param"] == "messages"


def test_unknown_route_is_an_openai_shaped_404(tight_gateway: GatewayHandle) -> None:
    r = httpx.get(tight_gateway.url + "/v1/nothing-here")
    assert r.status_code == 404
    _shape(r)


def test_provider_429_keeps_retry_after(tight_gateway: GatewayHandle, sim: SimHandle) -> None:
    sim.faults({"kind": "status", "status": 429, "retry_after": "30", "times": 1})
    client = openai.OpenAI(base_url=tight_gateway.base_url, api_key="k", max_retries=0)
    with pytest.raises(openai.RateLimitError) as info:
        client.chat.completions.create(model="gpt-4o-mini", messages=[{"role": "user", "content": "hi"}])
    assert info.value.response.headers["retry-after"] == "30"


def test_provider_503_is_retried_then_answered(tight_gateway: GatewayHandle, sim: SimHandle) -> None:
    sim.faults({"kind": "status", "status": 503, "times": 1})
    client = openai.OpenAI(base_url=tight_gateway.base_url, api_key="k", max_retries=0)
    got = client.chat.completions.create(model="gpt-4o-mini", messages=[{"role": "user", "content": "retry me"}])
    assert got.choices[0].message.content.startswith("Simulated answer")


def test_provider_500_past_retries_is_a_502(tight_gateway: GatewayHandle, sim: SimHandle) -> None:
    sim.faults({"kind": "status", "status": 500, "times": 2})
    r = _post(tight_gateway, json={"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "hi"}]})
    assert r.status_code == 502
    assert "500" in _shape(r)["message"]


def test_provider_hang_is_a_504(tight_gateway: GatewayHandle, sim: SimHandle) -> None:
    sim.faults({"kind": "hang", "seconds": 3, "times": 1})
    r = _post(tight_gateway, json={"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "hi"}]})
    assert r.status_code == 504
    assert _shape(r)["type"] == "timeout_error"


def test_malformed_provider_json_is_a_502(tight_gateway: GatewayHandle, sim: SimHandle) -> None:
    sim.faults({"kind": "malformed", "times": 1})
    r = _post(tight_gateway, json={"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "hi"}]})
    assert r.status_code == 502
    assert "malformed" in _shape(r)["message"]


def test_stream_dropped_half_way_ends_with_an_error_event(tight_gateway: GatewayHandle, sim: SimHandle) -> None:
    sim.faults({"kind": "drop_stream", "times": 1})
    client = openai.OpenAI(base_url=tight_gateway.base_url, api_key="k", max_retries=0)
    received: list[str] = []
    with pytest.raises(openai.APIError):
        for chunk in client.chat.completions.create(
            model="gpt-4o-mini", messages=[{"role": "user", "content": "a long answer please now"}], stream=True
        ):
            if chunk.choices:
                received.append(chunk.choices[0].delta.content or "")
    assert "".join(received).startswith("Simulated")
    assert tight_gateway.proc.poll() is None
