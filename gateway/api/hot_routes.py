"""The doors' plain routes reached without the router's walk: the same guards and error handlers, fewer layers.

Under FastAPI every request passes, inside the user middleware (``BrowserGuard``, ``CallerConcurrency``),
through ``ExceptionMiddleware``, FastAPI's ``AsyncExitStackMiddleware`` (for dependencies with ``yield``),
and the router, which tries each of ~40 routes in turn, then ``Route.handle``. The doors (chat,
Responses, Messages) are plain Starlette routes with fixed paths and no dependencies: nothing the
exit stack or the router's matching does is theirs. Profiled on a streamed chat request after a wait
(``py-spy`` over ``benchmarks.stage_costs --idle 15``) those layers were ~10 % of the request's
time on the event loop; this middleware, the innermost of the user middleware, sends a request for
one of those routes to its endpoint with the app's exception handlers in place (a ``Door``, below) and
everything else on through the app's stack unchanged.

A lane route is one layer (``Door``), not two: under the router a plain route passes through
``ExceptionMiddleware`` and then ``request_response``, each building a ``Request``, each wrapping the
request in its own handler of exceptions, and each putting a wrapper of ``send`` between the response
and the server, a coroutine on every write (a stream's head, each batch of events, its end). The door
builds one ``Request``, awaits the endpoint and then its response with the server's own ``send``, and
answers what the endpoint raises with the app's handler for it, looked up as Starlette looks it up.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException
from starlette.middleware.exceptions import ExceptionMiddleware
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Match, Route
from starlette.types import ASGIApp, Receive, Scope, Send

Endpoint = Callable[[Request], Awaitable[Response]]
Handler = Callable[[Request, Exception], Any]

Lane = dict[tuple[str, str], ASGIApp]


class HotRoutes:
    """User middleware, added first (innermost): plain fixed-path routes of ``owner`` straight to their endpoint."""

    def __init__(self, app: ASGIApp, *, owner: Starlette) -> None:
        self.app = app
        self.owner = owner  # the FastAPI app: its routes and handlers are complete once it serves
        self._lane: Lane | None = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        lane = self._lane
        if lane is None:
            lane = self._lane = build_lane(self.owner)
        if scope["type"] == "http" and not scope.get("root_path"):
            endpoint = lane.get((scope["method"], scope["path"]))
            if endpoint is not None:
                await endpoint(scope, receive, send)
                return
        await self.app(scope, receive, send)


def build_lane(owner: Starlette) -> Lane:
    """Each plain route's endpoint by (method, path), as a ``Door`` with the app's exception handlers.

    Only routes the router would match on the path alone: Starlette ``Route`` objects (not FastAPI's
    ``APIRoute``, which solves dependencies inside the exit stack) with no path parameters, whose
    endpoint is a coroutine function taking the request. A method a route does not take is left to the
    router, which answers it (405)."""
    handlers = {
        key: handler
        for key, handler in owner.exception_handlers.items()
        if key not in (500, Exception)  # the app's error handler: its ServerErrorMiddleware, outside, runs it
    }
    by_status = {key: h for key, h in handlers.items() if isinstance(key, int)}
    # Starlette's own answer to an HTTPException unless the app has one (as ``ExceptionMiddleware`` does)
    by_type: dict[Any, Handler] = {HTTPException: ExceptionMiddleware(owner).http_exception}
    by_type.update((key, h) for key, h in handlers.items() if isinstance(key, type))
    lane: Lane = {}
    routes = list(owner.router.routes)
    for route in routes:
        if type(route) is not Route or route.param_convertors or not route.methods:
            continue
        if not inspect.iscoroutinefunction(route.endpoint):  # a class or a sync function: the router's way
            continue
        guarded = Door(route.endpoint, by_type, by_status)
        for method in route.methods:
            if _first_match(routes, method, route.path) is route:
                lane[(method, route.path)] = guarded
    return lane


class Door:
    """One plain route's endpoint, answering what it raises with the app's handler for the exception.

    The response is sent with the server's ``send`` itself. What the response raises once it is being
    sent goes on outwards, to ``ServerErrorMiddleware`` (Starlette's handlers refuse to answer a
    response already started, and the gateway's responses start with their first await)."""

    def __init__(self, endpoint: Endpoint, by_type: Mapping[Any, Handler], by_status: Mapping[int, Handler]) -> None:
        self.endpoint = endpoint
        self.by_type = by_type
        self.by_status = by_status

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        scope["starlette.exception_handlers"] = (self.by_type, self.by_status)  # as under the router
        request = Request(scope, receive, send)
        try:
            response = await self.endpoint(request)
        except Exception as exc:
            handler = self.handler(exc)
            if handler is None:
                raise
            if inspect.iscoroutinefunction(handler):
                response = await handler(request, exc)
            else:
                response = await run_in_threadpool(handler, request, exc)
            exc.__traceback__ = None  # a reused exception instance would gather tracebacks across requests
            if response is None:
                return
        await response(scope, receive, send)

    def handler(self, exc: Exception) -> Handler | None:
        """The app's handler of ``exc``: by status for an ``HTTPException``, else the nearest class in its MRO."""
        if isinstance(exc, HTTPException):
            found = self.by_status.get(exc.status_code)
            if found is not None:
                return found
        for cls in type(exc).__mro__:
            if cls in self.by_type:
                return self.by_type[cls]
        return None


def _first_match(routes: list[BaseRoute], method: str, path: str) -> BaseRoute | None:
    """The route the router would run for ``method`` and ``path``: the first that matches fully."""
    scope: Scope = {"type": "http", "method": method, "path": path, "root_path": ""}
    for route in routes:
        match, _ = route.matches(scope)
        if match is Match.FULL:
            return route
    return None
