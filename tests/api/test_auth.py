"""Gateway keys: 401 in the OpenAI shape without a valid key, 403 for admin surfaces without an admin key."""

from __future__ import annotations

import hashlib
import subprocess
import sys
from collections.abc import Iterator

import httpx
import openai
import pytest

from gateway.api.admission import Admission
from gateway.api.auth import Access, hash_key
from gateway.config import AuthConfig, parse_settings
from gateway.errors import AuthError, ConfigError, PermissionDenied
from tests.procs import REPO_ROOT, GatewayHandle, SimHandle, _env, run_gateway, sim_models

CLIENT_KEY = "vk-client-4f1d"
ADMIN_KEY = "vk-admin-9c2e"
MESSAGES = [{"role": "user", "content": "who am I"}]


def _auth(**extra: object) -> dict[str, object]:
    return {"enabled": True, "keys": [hash_key(CLIENT_KEY)], "admin_keys": [hash_key(ADMIN_KEY)], **extra}


@pytest.fixture(scope="module")
def locked_gateway(sim: SimHandle, tmp_path_factory: pytest.TempPathFactory) -> Iterator[GatewayHandle]:
    config = {"models": sim_models(sim.base_url), "auth": _auth()}
    with run_gateway(tmp_path_factory.mktemp("gw-auth"), config) as handle:
        yield handle


def _error(response: httpx.Response) -> dict[str, object]:
    body = response.json()
    assert set(body) == {"error"} and set(body["error"]) == {"message", "type", "param", "code"}
    return body["error"]


def test_request_without_a_key_is_a_401_in_the_openai_shape(locked_gateway: GatewayHandle) -> None:
    r = httpx.post(locked_gateway.base_url + "/chat/completions", json={"model": "gpt-4o-mini", "messages": MESSAGES})
    assert r.status_code == 401
    error = _error(r)
    assert error["code"] == "invalid_api_key"
    assert "Authorization: Bearer" in str(error["message"])


def test_wrong_key_is_rejected_through_the_sdk(locked_gateway: GatewayHandle) -> None:
    client = openai.OpenAI(base_url=locked_gateway.base_url, api_key="vk-guess", max_retries=0)
    with pytest.raises(openai.AuthenticationError) as info:
        client.chat.completions.create(model="gpt-4o-mini", messages=MESSAGES)
    assert info.value.status_code == 401


@pytest.mark.parametrize("key", [CLIENT_KEY, ADMIN_KEY])
def test_valid_key_is_answered(locked_gateway: GatewayHandle, key: str) -> None:
    client = openai.OpenAI(base_url=locked_gateway.base_url, api_key=key, max_retries=0)
    got = client.chat.completions.create(model="gpt-4o-mini", messages=MESSAGES)
    assert got.choices[0].message.content.startswith("Simulated answer")


def test_model_list_needs_a_key(locked_gateway: GatewayHandle) -> None:
    assert httpx.get(locked_gateway.base_url + "/models").status_code == 401
    assert httpx.get(locked_gateway.base_url + "/models/gpt-4o-mini").status_code == 401
    client = openai.OpenAI(base_url=locked_gateway.base_url, api_key=CLIENT_KEY, max_retries=0)
    assert [m.id for m in client.models.list()] == ["gpt-4o-mini", "small-window"]


def test_admin_status_needs_an_admin_key(locked_gateway: GatewayHandle) -> None:
    url = locked_gateway.url + "/admin/status"
    assert httpx.get(url).status_code == 401
    forbidden = httpx.get(url, headers={"authorization": f"Bearer {CLIENT_KEY}"})
    assert forbidden.status_code == 403
    assert _error(forbidden)["type"] == "permission_error"
    ok = httpx.get(url, headers={"authorization": f"Bearer {ADMIN_KEY}"})
    assert ok.status_code == 200
    assert ok.json()["auth"] == {
        "enabled": True,
        "passthrough": False,
        "keys": 1,
        "admin_keys": 1,
        "protect_metrics": False,
    }
    assert hash_key(ADMIN_KEY) not in ok.text and hash_key(CLIENT_KEY) not in ok.text


def test_metrics_and_probes_stay_open(locked_gateway: GatewayHandle) -> None:
    assert httpx.get(locked_gateway.url + "/metrics").status_code == 200
    assert httpx.get(locked_gateway.url + "/healthz").status_code == 200


def test_access_refuses_admin_from_a_remote_host_when_no_admin_key_is_set() -> None:
    access = Access(AuthConfig())
    assert access.admin({}, "127.0.0.1").admin
    assert access.admin({}, "::1").admin
    with pytest.raises(PermissionDenied):
        access.admin({}, "10.1.2.3")
    with pytest.raises(PermissionDenied):
        access.admin({}, None)


def test_access_with_auth_on_and_no_admin_keys_admits_no_admin() -> None:
    access = Access(AuthConfig(enabled=True, keys=(hash_key(CLIENT_KEY),)))
    with pytest.raises(PermissionDenied):
        access.admin({"authorization": f"Bearer {CLIENT_KEY}"}, "127.0.0.1")


def test_passthrough_takes_the_gateway_key_from_its_own_header() -> None:
    admission = Admission(AuthConfig(enabled=True, keys=(hash_key(CLIENT_KEY),), passthrough=True))
    with pytest.raises(AuthError, match="x-ventana-key"):
        admission.principal({"authorization": f"Bearer {CLIENT_KEY}"})
    principal = admission.principal({"authorization": "Bearer sk-provider", "x-ventana-key": CLIENT_KEY})
    assert principal.caller == hash_key(CLIENT_KEY)[:12]


def test_config_refuses_a_raw_key_where_a_digest_belongs() -> None:
    with pytest.raises(ConfigError, match=r"auth\.keys: .*sha256"):
        parse_settings({"auth": {"enabled": True, "keys": [CLIENT_KEY]}})


def test_config_refuses_auth_that_nobody_could_pass() -> None:
    with pytest.raises(ConfigError, match="nobody could call"):
        parse_settings({"auth": {"enabled": True}})


def _keys_hash(*args: str, stdin: str | None = None) -> str:
    cmd = [sys.executable, "-m", "gateway.cli", "keys", "hash", *args]
    done = subprocess.run(cmd, input=stdin, capture_output=True, text=True, env=_env(), cwd=REPO_ROOT, check=True)
    return done.stdout


def test_keys_hash_prints_the_digest_of_a_given_key() -> None:
    out = _keys_hash("my-key")
    assert out.strip() == "sha256: " + hashlib.sha256(b"my-key").hexdigest()
    assert _keys_hash("--stdin", stdin="my-key\n") == out


def test_keys_hash_makes_a_new_key_whose_digest_it_prints() -> None:
    import json

    first, second = json.loads(_keys_hash("--json")), json.loads(_keys_hash("--json"))
    assert first["key"] != second["key"] and first["key"].startswith("vk-")
    assert first["sha256"] == hashlib.sha256(first["key"].encode()).hexdigest()
