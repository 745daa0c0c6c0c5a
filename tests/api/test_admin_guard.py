"""Nothing administrative answers without an admin key: every /admin and /ui route of the app is walked."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from fastapi.routing import APIRoute
from starlette.routing import Mount, Route

from gateway.api.admin import ADMIN_PREFIXES
from gateway.api.app import create_app
from gateway.api.auth import hash_key
from gateway.config import parse_settings
from tests.inproc import serve_in_thread
from tests.procs import SimHandle, sim_models

CLIENT_KEY, ADMIN_KEY = "vk-walk-client", "vk-walk-admin"


def _walk(routes: list[Any], prefix: str = "") -> Iterator[tuple[str, set[str]]]:
    """Every (path, methods) reachable from ``routes``, through included routers and mounts.

    FastAPI >= 0.160 keeps ``include_router`` lazily as an ``_IncludedRouter`` holding the
    original router; older versions flatten the routes into the app.
    """
    for route in routes:
        included = getattr(route, "original_router", None)
        if included is not None:
            inner_prefix = prefix + getattr(getattr(route, "include_context", None), "prefix", "")
            yield from _walk(included.routes, inner_prefix)
        elif isinstance(route, Mount):
            yield from _walk(route.routes, prefix + route.path)
            yield prefix + route.path, {"GET"}
        elif isinstance(route, APIRoute | Route):
            yield prefix + route.path, set(route.methods or ())


@pytest.fixture(scope="module")
def guarded(sim: SimHandle) -> Iterator[tuple[str, list[tuple[str, str]]]]:
    auth = {"enabled": True, "keys": [hash_key(CLIENT_KEY)], "admin_keys": [hash_key(ADMIN_KEY)]}
    app = create_app(parse_settings({"models": sim_models(sim.base_url), "auth": auth}))
    routes = [
        (method, re.sub(r"\{[^}]+\}", "x", path))
        for path, methods in _walk(app.routes)
        if path.startswith(ADMIN_PREFIXES)
        for method in sorted(methods)
    ]
    with serve_in_thread(app) as url:
        yield url, routes


def test_there_is_an_admin_surface_to_guard(guarded: tuple[str, list[tuple[str, str]]]) -> None:
    assert ("GET", "/admin/status") in guarded[1]


def test_every_admin_route_refuses_callers_without_an_admin_key(guarded: tuple[str, list[tuple[str, str]]]) -> None:
    url, routes = guarded
    for method, path in routes:
        assert httpx.request(method, url + path).status_code == 401, path
        client = httpx.request(method, url + path, headers={"authorization": f"Bearer {CLIENT_KEY}"})
        assert client.status_code == 403, path
        admin = httpx.request(method, url + path, headers={"authorization": f"Bearer {ADMIN_KEY}"})
        assert admin.status_code not in (401, 403), path


def test_protect_metrics_puts_metrics_behind_the_admin_key(sim: SimHandle) -> None:
    auth = {"enabled": True, "admin_keys": [hash_key(ADMIN_KEY)], "protect_metrics": True}
    app = create_app(parse_settings({"models": sim_models(sim.base_url), "auth": auth}))
    with serve_in_thread(app) as url:
        assert httpx.get(url + "/metrics").status_code == 401
        assert httpx.get(url + "/metrics", headers={"authorization": f"Bearer {ADMIN_KEY}"}).status_code == 200


def test_without_admin_keys_only_direct_loopback_clients_reach_admin(sim: SimHandle) -> None:
    app = create_app(parse_settings({"models": sim_models(sim.base_url)}))
    with serve_in_thread(app) as url:
        assert httpx.get(url + "/admin/status").status_code == 200
        proxied = httpx.get(url + "/admin/status", headers={"x-forwarded-for": "203.0.113.9"})
        assert proxied.status_code == 403
        assert "admin_keys" in proxied.json()["error"]["message"]
