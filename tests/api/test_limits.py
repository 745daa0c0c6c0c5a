"""Body-size limit when the client does not declare a length (chunked upload)."""

from __future__ import annotations

from collections.abc import Iterator

import httpx

from gateway.api.app import create_app
from gateway.config import parse_settings
from tests.inproc import serve_in_thread
from tests.procs import SimHandle, sim_models


def _chunks(total: int) -> Iterator[bytes]:
    yield b'{"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "'
    for _ in range(total // 1024):
        yield b"x" * 1024
    yield b'"}]}'


def test_chunked_body_past_the_limit_is_a_413(sim: SimHandle) -> None:
    settings = parse_settings({"models": sim_models(sim.base_url), "limits": {"max_body_bytes": 10_000}})
    with serve_in_thread(create_app(settings)) as url:
        r = httpx.post(
            url + "/v1/chat/completions", content=_chunks(50_000), headers={"content-type": "application/json"}
        )
        assert r.status_code == 413
        assert r.json()["error"]["code"] == "request_too_large"
        assert r.request.headers.get("transfer-encoding") == "chunked" and "content-length" not in r.request.headers
        small = httpx.post(
            url + "/v1/chat/completions", content=_chunks(2_000), headers={"content-type": "application/json"}
        )
        assert small.status_code == 200
