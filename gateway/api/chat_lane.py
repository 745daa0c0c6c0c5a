"""The chat door as the outermost ASGI app: a chat completion reaches ``answer_chat`` in one step.

Every other request passes the app's whole stack: Starlette's ``ServerErrorMiddleware``, FastAPI's
exception-telemetry and body-limit layers, the ``BrowserGuard``, ``HotRoutes`` and its ``Door``, which
builds a ``Request`` whose body is read through an async generator. For the door that carries nearly all
of a gateway's traffic those are ~10 coroutine layers and objects a request: measured beside LiteLLM's
proxy (RESULTS, session 53) they were part of the frame every request pays, with no feature to show for
it. ``ChatLane`` answers ``POST /v1/chat/completions`` (and ``/chat/completions``) itself, with the same
guard, admission, rate limit, body limit and exception handlers, and hands everything else to the stack:

- a request the browser guard refuses, and every request when the per-caller concurrency cap is on
  (``CallerConcurrency`` is a layer of the stack), take the stack, which answers as it always did;
- what the door raises before its response starts is answered by the app's handler for it, looked up
  as ``HotRoutes`` looks it up; with none, by the app's handler of last resort (a 500 in the OpenAI
  shape), and then raised on to the server, as ``ServerErrorMiddleware`` does; what a response raises
  once it has started goes on to the server, as through the stack.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable

from fastapi import FastAPI
from starlette.concurrency import run_in_threadpool
from starlette.datastructures import Headers
from starlette.requests import Request
from starlette.responses import Response
from starlette.types import ASGIApp, Receive, Scope, Send

from gateway.api.admission import Principal
from gateway.api.browser_guard import allowed, scope_refusal
from gateway.api.chat import answer_received
from gateway.api.deps import Gateway
from gateway.api.hot_routes import Door, build_lane

#: The chat door's paths, as ``create_app`` routes them.
CHAT_PATHS = frozenset({"/v1/chat/completions", "/chat/completions"})


class ChatLane:
    """Outermost: ``POST`` to the chat door answered here, everything else through ``stack``."""

    def __init__(
        self,
        stack: ASGIApp,
        *,
        owner: FastAPI,
        gw: Gateway,
        admit: Callable[[Scope], Principal],
        allowed_origins: frozenset[str],
    ) -> None:
        self.stack = stack
        self.owner = owner  # its handlers are complete once it serves
        self.gw = gw
        self.admit = admit
        self.allowed_origins = allowed_origins
        self._door: Door | None = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if (
            scope["type"] != "http"
            or scope["method"] != "POST"
            or scope["path"] not in CHAT_PATHS
            or scope.get("root_path")
            or scope_refusal(scope, self.allowed_origins) is not None  # the guard in the stack answers it
        ):
            await self.stack(scope, receive, send)
            return
        try:
            principal = self.admit(scope)
            response = await answer_received(self.gw, principal, Headers(scope=scope), receive)
        except Exception as exc:
            response, unexpected = await self._answer(scope, receive, exc)
            if unexpected:  # as ServerErrorMiddleware: the 500 sent, the error raised on to the server
                await response(scope, receive, send)
                raise
        await response(scope, receive, send)

    async def _answer(self, scope: Scope, receive: Receive, exc: Exception) -> tuple[Response, bool]:
        """The app's answer to ``exc``, and whether it is the handler of last resort's (no handler for ``exc``)."""
        door = self._door
        if door is None:
            door = self._door = _chat_door(self.owner)
        handler = door.handler(exc)
        unexpected = handler is None
        if handler is None:
            handler = self.owner.exception_handlers.get(Exception) or self.owner.exception_handlers.get(500)
            if handler is None:
                raise exc
        request = Request(scope, receive)
        if inspect.iscoroutinefunction(handler):
            response = await handler(request, exc)
        else:
            response = await run_in_threadpool(handler, request, exc)
        if not unexpected:
            exc.__traceback__ = None  # a reused exception instance would gather tracebacks across requests
        return response, unexpected


def _chat_door(owner: FastAPI) -> Door:
    """The ``Door`` ``HotRoutes`` would give the chat route: its lookup of the app's handlers."""
    return build_lane(owner)[("POST", "/v1/chat/completions")]  # type: ignore[return-value]


def install_chat_lane(
    app: FastAPI, *, gw: Gateway, admit: Callable[[Scope], Principal], allowed_origins: tuple[str, ...]
) -> None:
    """Put a ``ChatLane`` outside the stack the app builds when it first serves (its middleware is added by then)."""
    build = app.build_middleware_stack
    origins = allowed(allowed_origins)

    def with_lane() -> ASGIApp:
        return ChatLane(build(), owner=app, gw=gw, admit=admit, allowed_origins=origins)

    app.build_middleware_stack = with_lane  # type: ignore[method-assign]
