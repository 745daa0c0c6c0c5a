"""ChatLane: the chat door answered outside the app's stack, with the stack's guard, limits and handlers.

A spy middleware added to the app (the outermost of the stack) notes every request that passes the
stack, so each test tells which way a request went as well as what it got back.
"""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from fastapi import FastAPI
from starlette.types import ASGIApp, Receive, Scope, Send

from gateway.api import chat_lane
from gateway.api.app import create_app
from gateway.config import parse_settings

MODEL = {"name": "m", "litellm_model": "openai/m"}
UNKNOWN = b'{"model":"nope","messages":[{"role":"user","content":"hi"}]}'


def _app(**config: Any) -> tuple[FastAPI, list[str]]:
    app = create_app(parse_settings({"models": [MODEL], **config}))
    passed: list[str] = []

    class Spy:
        def __init__(self, app: ASGIApp) -> None:
            self.app = app

        async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
            if scope["type"] == "http":
                passed.append(scope["path"])
            await self.app(scope, receive, send)

    app.add_middleware(Spy)
    return app, passed


async def _post(app: FastAPI, path: str, body: bytes, **headers: str) -> httpx.Response:
    transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
    async with httpx.AsyncClient(transport=transport, base_url="http://gw") as client:
        sent = {"content-type": "application/json", **headers}
        return await client.post(path, content=body, headers=sent)


async def test_the_chat_door_is_answered_outside_the_stack_with_the_apps_handlers() -> None:
    app, passed = _app()
    unknown = await _post(app, "/v1/chat/completions", UNKNOWN)
    assert unknown.status_code == 404 and unknown.json()["error"]["code"] == "model_not_found"
    assert unknown.headers["x-ventana-request-id"].startswith("req-")
    broken = await _post(app, "/chat/completions", b'{"model": "m", "messages": [')
    assert broken.status_code == 400 and broken.json()["error"]["code"] == "invalid_json"
    assert (await _post(app, "/healthz", b"")).status_code == 405  # not the door: through the stack
    assert passed == ["/healthz"]


async def test_a_body_over_the_limit_is_refused_by_the_lane_as_by_the_stack() -> None:
    app, passed = _app(limits={"max_body_bytes": 64})
    body = b'{"model":"m","messages":[{"role":"user","content":"' + b"x" * 100 + b'"}]}'
    too_big = await _post(app, "/v1/chat/completions", body)
    assert too_big.status_code == 413 and too_big.json()["error"]["code"] == "request_too_large"
    assert passed == []


async def test_what_the_guard_refuses_and_a_capped_gateway_take_the_stack() -> None:
    app, passed = _app()
    cross = await _post(app, "/v1/chat/completions", b"{}", origin="https://evil.example")
    assert cross.status_code == 403 and cross.json()["error"]["code"] == "cross_origin_refused"
    assert passed == ["/v1/chat/completions"]
    capped, through = _app(limits={"max_concurrent_per_caller": 2})
    unknown = await _post(capped, "/v1/chat/completions", UNKNOWN)
    assert unknown.status_code == 404 and through == ["/v1/chat/completions"]


async def test_an_unexpected_error_gets_the_apps_500_and_is_raised_on(monkeypatch: pytest.MonkeyPatch) -> None:
    async def broken(*args: Any) -> Any:
        raise RuntimeError("a bug in the door")

    monkeypatch.setattr(chat_lane, "answer_received", broken)
    app, passed = _app()
    response = await _post(app, "/v1/chat/completions", b"{}")
    assert response.status_code == 500
    assert response.json()["error"]["message"] == "internal gateway error: RuntimeError"
    with pytest.raises(RuntimeError, match="a bug in the door"):  # on to the server, as ServerErrorMiddleware does
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://gw") as client:
            await client.post("/v1/chat/completions", content=b"{}", headers={"content-type": "application/json"})
    assert passed == []
