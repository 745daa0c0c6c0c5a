"""The inspector's routes: ``/ui`` (sessions), ``/ui/sessions/{id}`` (turns), ``/ui/requests/{id}``.

Server-rendered with Jinja2: no build step, no script fetched from anywhere. Every
route sits behind the admin guard; a browser may present the admin key as a bearer
header or as the session cookie set by ``POST /login`` (``ui/login.py``; outside ``/ui``
so that the login form itself is the only page reachable without a key).
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

from fastapi import APIRouter, Depends
from jinja2 import Environment, FileSystemLoader, select_autoescape
from sqlalchemy import Engine
from starlette.responses import HTMLResponse

from gateway.api.deps import Gateway
from gateway.assembly.budget_report import COMPONENTS
from gateway.errors import RequestError
from gateway.store.engine import make_engine
from gateway.store.inspect_request import diff_lines, render_message, zones
from gateway.store.queries import get_request
from gateway.tokens import counter_for, encoding_for_model
from gateway.ui.login import require_ui_admin
from gateway.ui.queries import list_session_rows, models_seen, session_turns

BAR_COMPONENTS = tuple(c for c in COMPONENTS if c != "reserve")
_TEMPLATES = Environment(
    loader=FileSystemLoader(Path(__file__).parent / "templates"),
    autoescape=select_autoescape(["html"]),
    trim_blocks=True,
    lstrip_blocks=True,
)
_TEMPLATES.filters["t"] = lambda ts: time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(ts))
_TEMPLATES.filters["n"] = lambda v: f"{int(v or 0):,}"
_TEMPLATES.filters["pct"] = lambda v: f"{100 * float(v or 0):.0f}%"


def _page(name: str, **values: Any) -> HTMLResponse:
    return HTMLResponse(_TEMPLATES.get_template(name).render(**values))


def bar_segments(budget: dict[str, Any] | None, scale: float) -> list[tuple[str, int, float]]:
    """(component, tokens, width %) for one turn's stacked bar."""
    components = (budget or {}).get("components") or {}
    out = []
    for name in BAR_COMPONENTS:
        tokens = int((components.get(name) or {}).get("tokens", 0))
        if tokens:
            out.append((name, tokens, 100 * tokens / scale if scale else 0.0))
    return out


def ui_router(gw: Gateway) -> APIRouter:
    router = APIRouter(prefix="/ui", dependencies=[Depends(require_ui_admin)])
    engines: dict[str, Engine] = {}

    def engine() -> Engine:
        if "read" not in engines:
            engines["read"] = make_engine(gw.settings.database_url)
        return engines["read"]

    @router.get("")
    @router.get("/")
    async def _sessions(q: str | None = None, model: str | None = None) -> HTMLResponse:
        rows = await asyncio.to_thread(list_session_rows, engine(), search=q or None, model=model or None)
        models = await asyncio.to_thread(models_seen, engine())
        return _page("sessions.html", rows=rows, q=q or "", model=model or "", models=models)

    @router.get("/sessions/{session_id:path}")
    async def _session(session_id: str) -> HTMLResponse:
        turns = await asyncio.to_thread(session_turns, engine(), session_id)
        if not turns:
            raise RequestError(f"no session {session_id!r} in the store", param="session_id", code="not_found")
        scale = max((t.prompt_tokens or t.tokens_assembled) for t in turns) or 1
        rows = [(t, bar_segments(t.budget, scale), 100 * t.cached_tokens / scale) for t in turns]
        first_compaction = next((t.turn for t in turns if t.compacted), None)
        return _page(
            "session.html",
            session_id=session_id,
            rows=rows,
            components=BAR_COMPONENTS,
            first_compaction=first_compaction,
        )

    @router.get("/requests/{request_id}")
    async def _request(request_id: str) -> HTMLResponse:
        stored = await asyncio.to_thread(get_request, engine(), request_id)
        if stored is None:
            raise RequestError(f"no request {request_id!r} in the store", param="request_id", code="not_found")
        model = gw.settings.model(stored.summary.model)
        counter = counter_for(model.tokenizer or encoding_for_model(model.litellm_model) if model else "o200k_base")
        messages = stored.assembled.get("messages") or []
        zoned = [
            (zone, [(i, counter.message(m), render_message(m)) for i, m in items])
            for zone, items in zones(messages).items()
        ]
        tools_tokens = counter.tools(stored.assembled.get("tools"))
        lint = [d for d in stored.decisions if d.get("pass") == "lint_context"]
        return _page(
            "request.html",
            stored=stored,
            zones=zoned,
            tools_tokens=tools_tokens,
            lint=lint,
            diff=diff_lines(stored),
            usage=stored.summary,
        )

    return router
