"""The Responses routes are behind the same gateway keys as the chat route, in the OpenAI error shape."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

from gateway.api.auth import hash_key
from tests.procs import GatewayHandle, SimHandle, run_gateway, sim_models

KEY = "vk-responses-7a1c"


@pytest.fixture(scope="module")
def locked_gateway(sim: SimHandle, tmp_path_factory: pytest.TempPathFactory) -> Iterator[GatewayHandle]:
    config = {"models": sim_models(sim.base_url), "auth": {"enabled": True, "keys": [hash_key(KEY)]}}
    with run_gateway(tmp_path_factory.mktemp("gw-responses-auth"), config) as handle:
        yield handle


def test_every_responses_route_needs_a_key(locked_gateway: GatewayHandle) -> None:
    url = locked_gateway.base_url + "/responses"
    body = {"model": "gpt-4o-mini", "input": "hi"}
    created = httpx.post(url, json=body, headers={"authorization": f"Bearer {KEY}"}, timeout=30)
    assert created.status_code == 200
    rid = created.json()["id"]
    for method, path in (("POST", ""), ("GET", f"/{rid}"), ("GET", f"/{rid}/input_items"), ("DELETE", f"/{rid}")):
        r = httpx.request(method, url + path, json=body if method == "POST" else None, timeout=30)
        assert r.status_code == 401, (method, path)
        assert r.json()["error"]["code"] == "invalid_api_key"
    assert httpx.get(f"{url}/{rid}", headers={"authorization": f"Bearer {KEY}"}).json()["id"] == rid


def test_malformed_json_and_unknown_model_are_openai_errors(locked_gateway: GatewayHandle) -> None:
    headers = {"authorization": f"Bearer {KEY}"}
    url = locked_gateway.base_url + "/responses"
    broken = httpx.post(url, content=b"{not json", headers=headers)
    assert broken.status_code == 400 and broken.json()["error"]["code"] == "invalid_json"
    unknown = httpx.post(url, json={"model": "nope", "input": "x"}, headers=headers)
    assert unknown.status_code == 404 and unknown.json()["error"]["code"] == "model_not_found"
