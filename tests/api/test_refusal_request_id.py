"""Every refusal before forwarding carries ``x-ventana-request-id``, as docs/hardening.md promises.

The official SDK raises on each refusal; the header is read from the exception's response,
which is what a client's error handler has in hand.
"""

from __future__ import annotations

import re

import httpx
import openai
import pytest

from gateway.api.app import create_app
from gateway.api.auth import hash_key
from gateway.config import parse_settings
from tests.inproc import serve_in_thread
from tests.procs import SimHandle, sim_models

KEY = "vk-refusals"
REQUEST_ID = re.compile(r"^req-[0-9a-f]{20}$")


def _refused(call: object) -> httpx.Response:
    with pytest.raises(openai.APIStatusError) as raised:
        call()  # type: ignore[operator]
    return raised.value.response


def test_every_refusal_before_forwarding_carries_a_request_id(sim: SimHandle) -> None:
    settings = parse_settings(
        {
            "models": sim_models(sim.base_url),
            "auth": {"enabled": True, "keys": [hash_key(KEY)]},
            "limits": {"max_body_bytes": 20_000, "requests_per_minute": 60, "rate_burst": 4},
        }
    )
    with serve_in_thread(create_app(settings)) as url:
        good = openai.OpenAI(base_url=url + "/v1", api_key=KEY, max_retries=0)
        bad = openai.OpenAI(base_url=url + "/v1", api_key="vk-wrong", max_retries=0)
        hello = [{"role": "user", "content": "hello"}]
        refusals = {
            401: _refused(lambda: bad.chat.completions.create(model="gpt-4o-mini", messages=hello)),
            404: _refused(lambda: good.chat.completions.create(model="no-such-model", messages=hello)),
            400: _refused(lambda: good.chat.completions.create(model="gpt-4o-mini", messages=[])),
            413: _refused(
                lambda: good.chat.completions.create(
                    model="gpt-4o-mini", messages=[{"role": "user", "content": "x" * 30_000}]
                )
            ),
        }
        for _ in range(10):
            try:
                good.chat.completions.create(model="gpt-4o-mini", messages=hello)
            except openai.RateLimitError as exc:
                refusals[429] = exc.response
                break
        refusals[404 + 1000] = httpx.get(url + "/v1/no-such-route", headers={"authorization": f"Bearer {KEY}"})
    assert sorted(refusals) == [400, 401, 404, 413, 429, 1404]
    for status, response in refusals.items():
        assert response.status_code == status % 1000, (status, response.text)
        assert REQUEST_ID.match(response.headers.get("x-ventana-request-id", "")), (status, dict(response.headers))
    ids = {r.headers["x-ventana-request-id"] for r in refusals.values()}
    assert len(ids) == len(refusals), "each refusal has its own id"
