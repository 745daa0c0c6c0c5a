"""Finding: ``/ui`` with auth off answered 200 behind proxy headers and under any ``Host`` (DNS rebinding).

With auth off and no admin key, admin surfaces answer loopback clients only. A reverse proxy
makes every client look local, so any proxy header refuses; a page on a rebound DNS name
reaches 127.0.0.1 with its own name as ``Host``, so only loopback names (and configured ones) pass.
"""

from __future__ import annotations

import httpx
import pytest

from gateway.api.auth import Access
from gateway.config import AuthConfig

PROXY = [{"x-real-ip": "203.0.113.7"}, {"forwarded": "for=203.0.113.7"}, {"x-forwarded-for": "203.0.113.7"}]


@pytest.mark.parametrize("path", ["/ui", "/admin/status"])
@pytest.mark.parametrize("headers", PROXY, ids=lambda h: next(iter(h)))
def test_admin_surfaces_refuse_a_proxied_client(open_gateway: str, path: str, headers: dict[str, str]) -> None:
    assert httpx.get(open_gateway + path, headers=headers).status_code == 403


@pytest.mark.parametrize("path", ["/ui", "/admin/status"])
def test_admin_surfaces_refuse_a_foreign_host_name(open_gateway: str, path: str) -> None:
    assert httpx.get(open_gateway + path, headers={"host": "rebound.evil.example:8080"}).status_code == 403


@pytest.mark.parametrize("host", ["localhost:8080", "127.0.0.1", "[::1]:8080"])
def test_loopback_names_still_open_admin_surfaces(open_gateway: str, host: str) -> None:
    assert httpx.get(open_gateway + "/admin/status", headers={"host": host}).status_code == 200


def test_a_configured_host_name_is_allowed() -> None:
    access = Access(AuthConfig(allowed_hosts=("gw.internal",)))
    assert access.admin({"host": "gw.internal:8080"}, "127.0.0.1").admin
    with pytest.raises(Exception, match="admin"):
        access.admin({"host": "other.internal"}, "127.0.0.1")
