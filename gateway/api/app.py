"""Build the FastAPI application: routes, the single error handler, start-up and shutdown.

Only this package imports FastAPI. Every error leaves as the OpenAI error body
``{"error": {"message", "type", "param", "code"}}``, including ones the gateway did not
anticipate (a 500 with the exception type, logged with its traceback, the process stays up).
"""

from __future__ import annotations

import asyncio
import gc
import logging
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING

import orjson
from fastapi import Depends, FastAPI
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from gateway import metrics
from gateway.api.admin import admin_router
from gateway.api.admission import Admission, Principal, admit, require_client
from gateway.api.auth import Access, require_admin
from gateway.api.browser_guard import BrowserGuard
from gateway.api.caller_concurrency import CallerConcurrency
from gateway.api.chat import chat_completions
from gateway.api.deps import Gateway
from gateway.api.hot_routes import HotRoutes
from gateway.api.loop_lag import CallbackTimer, LoopLagProbe
from gateway.api.messages import count_tokens, create_message
from gateway.api.rate_limit import RateLimiter
from gateway.api.refusals import record_refusal
from gateway.api.request_ids import REQUEST_ID_HEADER, new_request_id
from gateway.api.responses import add_responses_routes
from gateway.config import Settings
from gateway.edges.edges import Edges
from gateway.errors import UpstreamError, VentanaError
from gateway.sched_slice import current_slice_us, request_slice
from gateway.sessions.memory import MemorySessionStore
from gateway.sessions.protocol import SessionStore
from gateway.store.record import MemoryRecorder, Recorder
from gateway.ui.login import login_router
from gateway.ui.pages import ui_router
from gateway.upstream.router import UpstreamRouter

if TYPE_CHECKING:
    from gateway.store.tool_profiles import ToolProfileStore

log = logging.getLogger("ventana")


def freeze_startup_objects() -> None:
    """Exclude everything built at start-up from the cyclic garbage collector's full passes.

    A full collection walks every tracked object, including the ~500K that imports and
    start-up created. While large bodies pile up (each parsed 105K-token request is
    thousands of dicts, held by in-flight requests and the recorder's queue), full passes
    come often: parsing with 256 such bodies alive measured 0.61 ms median and 49 ms worst
    (a full pass inside ``orjson.loads``, blocking the loop); with start-up objects frozen
    0.38 ms and 1.0 ms. Frozen objects are never freed, which is right for modules and config.
    """
    gc.collect()
    gc.freeze()


#: How long a worker thread may hold the GIL while the event loop waits for it (Python's
#: default is 5 ms). Assembly of a very large request and the store writer run in threads; at
#: 5 ms a loop thread waking up to serve another request could wait that long for its turn.
GIL_SWITCH_INTERVAL_S = 0.001


def error_response(exc: VentanaError, headers: dict[str, str] | None = None) -> Response:
    """The OpenAI error body; every error carries a request id, a refusal before forwarding too.

    A request refused before forwarding (401, 404, 413, 429, bad input) is not recorded in
    the store; its id is in the gateway's log line, so a client can still quote it.
    """
    merged = {**exc.headers, **(headers or {})}
    merged.setdefault(REQUEST_ID_HEADER, new_request_id())
    return Response(
        orjson.dumps(exc.body()), status_code=exc.status_code, media_type="application/json", headers=merged
    )


def create_app(
    settings: Settings,
    *,
    recorder: Recorder | None = None,
    sessions: SessionStore | None = None,
    tool_profiles: ToolProfileStore | None = None,
) -> FastAPI:
    recorder = recorder or MemoryRecorder()
    sessions = sessions or MemorySessionStore()
    # Built now, not by the first request: a configured LLM summariser or fact extractor imports
    # its HTTP client (~0.15 s), which must not hold the event loop under traffic.
    edges = Edges.build(settings, sessions, stored=recorder.stored, tool_profiles=tool_profiles)
    gw = Gateway(
        settings=settings, upstream=UpstreamRouter(settings.upstream), sessions=sessions, recorder=recorder, edges=edges
    )

    probe_ms = settings.diagnostics.loop_lag_probe_ms
    probe = LoopLagProbe(interval_s=probe_ms / 1000) if probe_ms else None
    callbacks = CallbackTimer() if settings.diagnostics.time_callbacks else None

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        await gw.recorder.start()
        await asyncio.to_thread(gw.load_tokenizers)
        for edge in gw.edges.ordered:
            await edge.start()
        freeze_startup_objects()
        sys.setswitchinterval(GIL_SWITCH_INTERVAL_S)
        # After the writer thread started (it keeps its slice); the slice found, to give back when the app stops
        # (a test or an embedding running the app in its own thread), if the loop's was changed.
        slice_asked, slice_found = settings.scheduling.loop_slice_us, current_slice_us()
        gw.gives_way = slice_asked is not None and request_slice(slice_asked)
        give_back = slice_found if gw.gives_way else None
        if probe is not None:
            probe.start()
        if callbacks is not None:
            callbacks.install()
        try:
            yield
        finally:
            gw.gives_way = False
            if give_back is not None:
                request_slice(give_back)
            if callbacks is not None:
                callbacks.uninstall()
            if probe is not None:
                await probe.stop()
            # Summaries being prepared and passages being archived finish before the store closes,
            # so a shutdown loses neither; their HTTP clients and engine are released after.
            for edge in gw.edges.ordered:
                await edge.stop()
            await gw.recorder.close()
            await responses_route.store.close()  # its engine's pool, which nothing else released
            await gw.sessions.close()
            await gw.upstream.close()
            gw.memos.clear()
            metrics.stop_worker()

    metrics.start_gateway(settings, gw.info)
    # FastAPI's own OpenTelemetry asks the global providers on every request whether one is configured
    # (~3 % of a small request's time on the loop); off unless diagnostics.opentelemetry asks for it.
    otel = settings.diagnostics.opentelemetry
    app = FastAPI(
        title="Ventana",
        lifespan=lifespan,
        docs_url=None,
        redoc_url=None,
        openapi_url=None,
        telemetry={"tracing": otel, "metrics": otel, "logs": otel},
    )
    app.state.gateway = gw
    app.state.access = Access(settings.auth)
    app.state.admission = Admission(settings.auth)
    limiter = RateLimiter.from_config(settings.limits)

    app.state.loop_lag_probe = probe
    app.state.loop_callback_timer = callbacks

    @app.exception_handler(VentanaError)
    async def _ventana_error(request: Request, exc: VentanaError) -> Response:
        response = error_response(exc)
        if exc.status_code < 500 and not isinstance(exc, UpstreamError):  # upstream ones: counted in chat.py
            metrics.REJECTED.labels(exc.code or exc.error_type).inc()
            record_refusal(gw, request, exc, response.headers[REQUEST_ID_HEADER])
            log.info(
                "refused %s %s: %s %s (%s)",
                request.method,
                request.url.path,
                exc.status_code,
                exc.code or exc.error_type,
                response.headers[REQUEST_ID_HEADER],
            )
        return response

    @app.exception_handler(HTTPException)
    async def _http_error(request: Request, exc: HTTPException) -> Response:
        kind = "not_found" if exc.status_code == 404 else "invalid_request_error"
        body = {
            "error": {
                "message": f"{exc.detail}: {request.method} {request.url.path}",
                "type": kind,
                "param": None,
                "code": None,
            }
        }
        return JSONResponse(body, status_code=exc.status_code, headers={REQUEST_ID_HEADER: new_request_id()})

    @app.exception_handler(Exception)
    async def _unexpected(request: Request, exc: Exception) -> Response:
        log.exception("unexpected error on %s %s", request.method, request.url.path)
        return error_response(VentanaError(f"internal gateway error: {type(exc).__name__}"))

    def _admit(request: Request) -> Principal:
        """Every door's admission: the request's one ``Principal`` (admission.py), then its rate limit."""
        principal = admit(request)
        if limiter is not None:
            limiter.admit(principal.caller)
        return principal

    async def _chat(request: Request) -> Response:
        return await chat_completions(request, gw, _admit(request))

    # Plain Starlette routes, not FastAPI's: the chat route reads its own body and needs no
    # dependency solving, which costs ~0.1 ms a request on the hot path. Admission (key and
    # rate limit) is checked inline; the exception handlers above still apply.
    app.add_route("/v1/chat/completions", _chat, methods=["POST"])
    app.add_route("/chat/completions", _chat, methods=["POST"])

    responses_route = add_responses_routes(app, gw, _admit)

    async def _messages(request: Request) -> Response:
        return await create_message(request, gw, _admit)

    async def _count_tokens(request: Request) -> Response:
        return await count_tokens(request, gw, _admit)

    # The Anthropic Messages front door renders its own errors, in Anthropic's shape.
    app.add_route("/v1/messages", _messages, methods=["POST"])
    app.add_route("/v1/messages/count_tokens", _count_tokens, methods=["POST"])

    @app.get("/v1/models", dependencies=[Depends(require_client)])
    @app.get("/models", dependencies=[Depends(require_client)])
    async def _models() -> Response:
        created = int(gw.started_at)
        data = [{"id": m.name, "object": "model", "created": created, "owned_by": m.provider} for m in settings.models]
        return Response(orjson.dumps({"object": "list", "data": data}), media_type="application/json")

    @app.get("/v1/models/{model_id:path}", dependencies=[Depends(require_client)])
    async def _model(model_id: str) -> Response:
        model = settings.model(model_id)
        if model is None:
            from gateway.errors import UnknownModel

            return error_response(UnknownModel(f"the model {model_id!r} does not exist here", param="model"))
        body = {"id": model.name, "object": "model", "created": int(gw.started_at), "owned_by": model.provider}
        return Response(orjson.dumps(body), media_type="application/json")

    @app.get("/healthz")
    async def _healthz() -> Response:
        return Response(b'{"status":"ok"}', media_type="application/json")

    @app.get("/readyz")
    async def _readyz() -> Response:
        ready = gw.recorder.ready() and bool(settings.models)
        body = {
            "status": "ready" if ready else "not ready",
            "store": gw.recorder.ready(),
            "store_status": gw.recorder.status(),
            "models": len(settings.models),
        }
        return Response(orjson.dumps(body), status_code=200 if ready else 503, media_type="application/json")

    # /metrics carries counts and latencies with model-name labels only, no content or keys, so it
    # stays open for Prometheus scrapes unless auth.protect_metrics puts it behind an admin key.
    metrics_guard = [Depends(require_admin)] if settings.auth.protect_metrics else []

    @app.get("/metrics", dependencies=metrics_guard)
    async def _metrics() -> Response:
        # Rendering every series is ~8 ms of Python (the callback timer caught a scrape as the
        # longest hold of the loop): a thread, so requests in flight are not held up by it.
        payload, content_type = await asyncio.to_thread(metrics.render)
        return Response(payload, media_type=content_type)

    app.include_router(admin_router(gw))
    app.include_router(ui_router(gw))
    app.include_router(login_router())
    app.add_middleware(HotRoutes, owner=app)  # the innermost: the doors' routes without the router's walk
    if settings.limits.max_concurrent_per_caller:
        app.add_middleware(
            CallerConcurrency, admission=app.state.admission, limit=settings.limits.max_concurrent_per_caller
        )
    app.add_middleware(BrowserGuard, allowed_origins=settings.auth.allowed_origins)
    return app
