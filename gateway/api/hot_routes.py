"""The doors' plain routes reached without the router's walk: the same guards and error handlers, fewer layers.

Under FastAPI every request passes, inside the user middleware (``BrowserGuard``, ``CallerConcurrency``),
through ``ExceptionMiddleware``, FastAPI's ``AsyncExitStackMiddleware`` (for dependencies with ``yield``),
and the router, which tries each of ~40 routes in turn, then ``Route.handle``. The doors (chat,
Responses, Messages) are plain Starlette routes with fixed paths and no dependencies: nothing the
exit stack or the router's matching does is theirs. Profiled on a streamed chat request after a wait
(``py-spy`` over ``benchmarks.stage_costs --idle 15``) those layers were ~10 % of the request's
time on the event loop; this middleware, the innermost of the user middleware, sends a request for
one of those routes to its endpoint with the app's exception handlers in place (its own
``ExceptionMiddleware``, built from the app's handlers as FastAPI builds its own) and everything
else on through the app's stack unchanged.
"""

from __future__ import annotations

from starlette.applications import Starlette
from starlette.middleware.exceptions import ExceptionMiddleware
from starlette.routing import BaseRoute, Match, Route
from starlette.types import ASGIApp, Receive, Scope, Send

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
    """Each plain route's endpoint by (method, path), behind an ``ExceptionMiddleware`` with the app's handlers.

    Only routes the router would match on the path alone: Starlette ``Route`` objects (not FastAPI's
    ``APIRoute``, which solves dependencies inside the exit stack) with no path parameters. A method
    a route does not take is left to the router, which answers it (405)."""
    handlers = {
        key: handler
        for key, handler in owner.exception_handlers.items()
        if key not in (500, Exception)  # the app's error handler: its ServerErrorMiddleware, outside, runs it
    }
    debug = owner.debug
    lane: Lane = {}
    routes = list(owner.router.routes)
    for route in routes:
        if type(route) is not Route or route.param_convertors or not route.methods:
            continue
        guarded = ExceptionMiddleware(route.app, handlers=handlers, debug=debug)
        for method in route.methods:
            if _first_match(routes, method, route.path) is route:
                lane[(method, route.path)] = guarded
    return lane


def _first_match(routes: list[BaseRoute], method: str, path: str) -> BaseRoute | None:
    """The route the router would run for ``method`` and ``path``: the first that matches fully."""
    scope: Scope = {"type": "http", "method": method, "path": path, "root_path": ""}
    for route in routes:
        match, _ = route.matches(scope)
        if match is Match.FULL:
            return route
    return None
