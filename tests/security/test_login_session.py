"""Finding: the login cookie was the raw admin key, with no ``Secure``, no expiry and no logout, and
``/login`` stored any value and read an unbounded body.

Now ``/login`` checks the key and sets a random, expiring session token (``Secure`` over https),
``/logout`` revokes it, and a login body past 4 KB is refused.
"""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

from gateway.api.auth import hash_key
from tests.procs import GatewayHandle, SimHandle, run_gateway, sim_models

ADMIN_KEY = "vk-login-admin-0123456789abcdef"


@pytest.fixture(scope="module")
def gw(sim: SimHandle, tmp_path_factory: pytest.TempPathFactory) -> Iterator[GatewayHandle]:
    auth = {"enabled": True, "admin_keys": [hash_key(ADMIN_KEY)]}
    with run_gateway(tmp_path_factory.mktemp("gw-login"), {"models": sim_models(sim.base_url), "auth": auth}) as h:
        yield h


def _login(gw: GatewayHandle, key: str, **headers: str) -> httpx.Response:
    form = {"content-type": "application/x-www-form-urlencoded", **headers}
    return httpx.post(gw.url + "/login", content=f"key={key}".encode(), headers=form)


def test_the_cookie_is_a_random_expiring_token_not_the_key(gw: GatewayHandle) -> None:
    r = _login(gw, ADMIN_KEY)
    assert r.status_code == 303 and r.headers["location"] == "/ui"
    cookie = r.headers["set-cookie"]
    token = r.cookies["ventana_admin"]
    assert ADMIN_KEY not in cookie and len(token) >= 40
    assert "Max-Age=" in cookie and "HttpOnly" in cookie and "SameSite=strict" in cookie and "Secure" not in cookie
    assert httpx.get(gw.url + "/ui", cookies={"ventana_admin": token}).status_code == 200
    assert httpx.get(gw.url + "/ui", cookies={"ventana_admin": ADMIN_KEY}).status_code == 401, "the key is no cookie"
    assert "Secure" in _login(gw, ADMIN_KEY, **{"x-forwarded-proto": "https"}).headers["set-cookie"]


def test_a_wrong_key_gets_no_session(gw: GatewayHandle) -> None:
    r = _login(gw, "vk-guess")
    assert r.status_code == 303 and r.headers["location"] == "/login" and "set-cookie" not in r.headers


def test_logout_revokes_the_token(gw: GatewayHandle) -> None:
    token = _login(gw, ADMIN_KEY).cookies["ventana_admin"]
    out = httpx.post(gw.url + "/logout", cookies={"ventana_admin": token})
    assert out.status_code == 303
    assert httpx.get(gw.url + "/ui", cookies={"ventana_admin": token}).status_code == 401


def test_an_oversized_login_body_is_refused(gw: GatewayHandle) -> None:
    assert _login(gw, "k" * 100_000).status_code == 413
