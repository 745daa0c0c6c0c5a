"""Finding: with auth off, a cross-origin ``text/plain`` POST was forwarded with the gateway's provider key.

A browser sends a cross-site POST without a preflight only with a "simple" content type, so
POST bodies must be declared JSON (415); a request whose ``Origin`` is another site is refused
(403) unless configured. Nothing refused reaches the provider.
"""

from __future__ import annotations

import httpx
import openai
import orjson
import pytest

from gateway.api.browser_guard import refusal
from tests.procs import SimHandle

BODY = orjson.dumps({"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "spend the key"}]})


@pytest.mark.parametrize("content_type", ["text/plain", "application/x-www-form-urlencoded", "multipart/form-data"])
def test_a_post_that_is_not_declared_json_is_refused_and_not_forwarded(
    open_gateway: str, sim: SimHandle, content_type: str
) -> None:
    sim.reset()
    r = httpx.post(open_gateway + "/v1/chat/completions", content=BODY, headers={"content-type": content_type})
    assert r.status_code == 415
    assert r.json()["error"]["code"] == "unsupported_media_type"
    assert sim.received() == []


def test_a_cross_origin_browser_request_is_refused(open_gateway: str, sim: SimHandle) -> None:
    sim.reset()
    headers = {"content-type": "text/plain", "origin": "https://evil.example"}
    r = httpx.post(open_gateway + "/v1/chat/completions", content=BODY, headers=headers)
    assert r.status_code == 403 and r.json()["error"]["code"] == "cross_origin_refused"
    json_too = {"content-type": "application/json", "origin": "https://evil.example", "sec-fetch-site": "cross-site"}
    assert httpx.post(open_gateway + "/v1/chat/completions", content=BODY, headers=json_too).status_code == 403
    assert sim.received() == []


def test_sdk_clients_and_configured_origins_are_served(open_gateway: str) -> None:
    client = openai.OpenAI(base_url=open_gateway + "/v1", api_key="sk-x", max_retries=0)
    assert client.chat.completions.create(model="gpt-4o-mini", messages=[{"role": "user", "content": "hi"}]).choices
    allowed = frozenset({"https://app.example"})
    headers = {"origin": "https://app.example", "content-type": "application/json"}
    assert refusal("POST", "/v1/chat/completions", headers, allowed) is None


def test_no_content_type_is_left_to_the_origin_check() -> None:
    assert refusal("DELETE", "/v1/responses/resp_1", {"host": "127.0.0.1:8080"}, frozenset()) is None
    page = {"host": "127.0.0.1:8080", "origin": "https://evil.example"}  # a typeless Blob body from a page
    assert refusal("POST", "/v1/chat/completions", page, frozenset()) is not None
