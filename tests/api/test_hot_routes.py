"""HotRoutes: the doors' plain routes reach their endpoints without the router, and answer as through it.

The router marks the scope it routes (``scope["router"]``); an endpoint reached through the lane has
no such mark, so each test can tell which way a request went as well as what it got back.
"""

from __future__ import annotations

from typing import Any

import httpx
from fastapi import FastAPI
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from gateway.api.app import create_app
from gateway.api.hot_routes import HotRoutes, build_lane
from gateway.config import parse_settings


def _app() -> tuple[FastAPI, list[tuple[str, bool]]]:
    """A FastAPI app shaped like the gateway's: plain routes, a parameter route before a fixed one, an API route,
    an HTTPException handler and a handler of last resort; each endpoint notes whether the router ran it."""
    seen: list[tuple[str, bool]] = []
    app = FastAPI()

    def endpoint(name: str, fail: Exception | None = None) -> Any:
        async def run(request: Request) -> Response:
            seen.append((name, "router" in request.scope))
            if fail is not None:
                raise fail
            return JSONResponse({"route": name})

        return run

    app.add_route("/v1/chat", endpoint("chat"), methods=["POST"])
    app.add_route("/v1/items/{item}", endpoint("item"), methods=["POST"])
    app.add_route("/v1/items/fixed", endpoint("fixed"), methods=["POST"])  # shadowed by the route above
    app.add_route("/v1/teapot", endpoint("teapot", HTTPException(418, "short and stout")), methods=["POST"])
    app.add_route("/v1/broken", endpoint("broken", RuntimeError("boom")), methods=["POST"])

    @app.get("/v1/api")
    async def api() -> dict[str, str]:
        seen.append(("api", True))
        return {"route": "api"}

    @app.exception_handler(HTTPException)
    async def http_error(request: Request, exc: HTTPException) -> Response:
        return JSONResponse({"error": {"message": exc.detail, "type": "http"}}, status_code=exc.status_code)

    @app.exception_handler(Exception)
    async def unexpected(request: Request, exc: Exception) -> Response:
        return JSONResponse({"error": {"message": type(exc).__name__, "type": "server_error"}}, status_code=500)

    app.add_middleware(HotRoutes, owner=app)
    return app, seen


async def _post(app: FastAPI, path: str, method: str = "POST") -> httpx.Response:
    transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
    async with httpx.AsyncClient(transport=transport, base_url="http://gw") as client:
        return await client.request(method, path, json={})


async def test_a_plain_route_is_served_without_the_router() -> None:
    app, seen = _app()
    response = await _post(app, "/v1/chat")
    assert response.status_code == 200 and response.json() == {"route": "chat"}
    assert seen == [("chat", False)]


async def test_what_the_lane_does_not_hold_goes_through_the_router() -> None:
    app, seen = _app()
    assert (await _post(app, "/v1/api", "GET")).json() == {"route": "api"}  # an API route: dependencies, exit stack
    assert (await _post(app, "/v1/items/7")).json() == {"route": "item"}  # a path parameter
    assert (await _post(app, "/v1/chat", "GET")).status_code == 405  # a method the route does not take
    assert (await _post(app, "/v1/nowhere")).status_code == 404
    assert seen == [("api", True), ("item", True)]


async def test_a_path_the_router_gives_to_an_earlier_route_is_left_to_it() -> None:
    app, seen = _app()
    assert (await _post(app, "/v1/items/fixed")).json() == {"route": "item"}
    assert seen == [("item", True)]


async def test_the_apps_handlers_answer_what_a_lane_route_raises() -> None:
    app, seen = _app()
    teapot = await _post(app, "/v1/teapot")
    assert teapot.status_code == 418 and teapot.json()["error"] == {"message": "short and stout", "type": "http"}
    broken = await _post(app, "/v1/broken")
    assert broken.status_code == 500 and broken.json()["error"] == {"message": "RuntimeError", "type": "server_error"}
    assert seen == [("teapot", False), ("broken", False)]


def test_the_gateways_lane_holds_its_doors_and_nothing_with_dependencies_or_parameters() -> None:
    app = create_app(parse_settings({"models": [{"name": "m", "litellm_model": "openai/m"}]}))
    lane = build_lane(app)
    for path in (
        "/v1/chat/completions",
        "/chat/completions",
        "/v1/responses",
        "/v1/responses/compact",
        "/v1/messages",
        "/v1/messages/count_tokens",
    ):
        assert ("POST", path) in lane, path
    assert not any(path.startswith("/v1/models") or "{" in path for _, path in lane)
    assert ("GET", "/v1/chat/completions") not in lane


async def test_a_lane_route_is_one_layer_its_response_writing_with_the_servers_own_send() -> None:
    """Under the router a plain route's response writes through two wrappers of ``send`` (one per handler
    of exceptions), a coroutine on each write; through the lane it gets the server's ``send`` itself."""
    app = FastAPI()
    given: list[Any] = []

    class Spy(Response):
        async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
            given.append(send)
            await super().__call__(scope, receive, send)

    async def spy(request: Request) -> Response:
        return Spy(b"ok")

    app.add_route("/v1/spy", spy, methods=["POST"])
    door = build_lane(app)[("POST", "/v1/spy")]
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    scope = {"type": "http", "method": "POST", "path": "/v1/spy", "headers": [], "query_string": b"", "root_path": ""}
    await door(scope, receive, send)
    assert given == [send]
    assert [m["type"] for m in sent] == ["http.response.start", "http.response.body"] and sent[0]["status"] == 200


async def test_the_lane_answers_with_fastapis_default_and_a_plain_functions_handler_as_the_router_does() -> None:
    app = FastAPI()

    async def gone(request: Request) -> Response:
        raise HTTPException(410, "long gone")

    def sync_handler(request: Request, exc: Exception) -> Response:  # a plain function: run in the threadpool
        return JSONResponse({"error": {"message": str(exc)}}, status_code=422)

    app.add_route("/v1/gone", gone, methods=["POST"])
    app.add_route("/v1/bad", _raising(ValueError("no such value")), methods=["POST"])
    app.add_exception_handler(ValueError, sync_handler)
    app.add_middleware(HotRoutes, owner=app)
    assert ("POST", "/v1/gone") in build_lane(app)
    response = await _post(app, "/v1/gone")
    assert response.status_code == 410 and response.json() == {"detail": "long gone"}  # FastAPI's own handler
    bad = await _post(app, "/v1/bad")
    assert bad.status_code == 422 and bad.json() == {"error": {"message": "no such value"}}


def _raising(exc: Exception) -> Any:
    async def run(request: Request) -> Response:
        raise exc

    return run
