"""The inspector's routes: ``/ui`` (sessions), ``/ui/sessions/{id}`` (turns), ``/ui/requests/{id}``.

Server-rendered with Jinja2: no build step, no script fetched from anywhere. Every
route sits behind the admin guard; a browser may present the admin key as a bearer
header or as the session cookie set by ``POST /login`` (``ui/login.py``; outside ``/ui``
so that the login form itself is the only page reachable without a key).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import orjson
from fastapi import APIRouter, Depends
from jinja2 import Environment, FileSystemLoader, select_autoescape
from sqlalchemy import Engine
from starlette.requests import Request
from starlette.responses import HTMLResponse

from gateway.api.deps import Gateway
from gateway.store.engine import make_engine
from gateway.store.inspect_request import budget_rows, diff_lines, zones
from gateway.store.queries import StoredRequest, get_request
from gateway.tokens import TokenCounter, counter_for, encoding_for_model
from gateway.ui.login import require_ui_admin
from gateway.ui.queries import TurnRow, callers_seen, list_session_rows, models_seen, neighbours, session_turns
from gateway.ui.request_view import changes, chat_message, outcome, tool_names
from gateway.ui.session_view import SessionsForm, session_cost, turn_chart
from gateway.upstream.model_info import ModelInfo

#: In the order the context is laid out (the summary replaces the oldest history, so it comes first).
BAR_COMPONENTS = ("system", "tools", "summary", "history", "documents", "query", "reminder")
_TEMPLATES = Environment(
    loader=FileSystemLoader(Path(__file__).parent / "templates"),
    autoescape=select_autoescape(["html"]),
    trim_blocks=True,
    lstrip_blocks=True,
)
_TEMPLATES.filters["t"] = lambda ts: time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(ts))
_TEMPLATES.filters["n"] = lambda v: f"{int(v or 0):,}"
_TEMPLATES.filters["pct"] = lambda v: f"{100 * float(v or 0):.0f}%"


def _page(name: str, *, status_code: int = 200, **values: Any) -> HTMLResponse:
    return HTMLResponse(_TEMPLATES.get_template(name).render(**values), status_code=status_code)


def bar_segments(budget: dict[str, Any] | None, scale: float) -> list[tuple[str, int, float]]:
    """(component, tokens, width %) for one turn's stacked bar."""
    components = (budget or {}).get("components") or {}
    out = []
    for name in BAR_COMPONENTS:
        tokens = int((components.get(name) or {}).get("tokens", 0))
        if tokens:
            out.append((name, tokens, 100 * tokens / scale if scale else 0.0))
    return out


def session_page(session_id: str, turns: Sequence[TurnRow]) -> dict[str, Any]:
    """The session page's values: the chart, one bar per turn on a shared scale, the counts."""
    scale = max((t.prompt_tokens or t.tokens_assembled) for t in turns) or 1
    return {
        "session_id": session_id,
        "rows": [(t, bar_segments(t.budget, scale), 100 * t.cached_tokens / scale) for t in turns],
        "chart": turn_chart(turns),
        "components": BAR_COMPONENTS,
        "first_compaction": next((t.turn for t in turns if t.compacted), None),
        "compactions": sum(t.compacted for t in turns),
        "tool_changes": sum(t.tool_set_changed for t in turns),
    }


def request_page(
    stored: StoredRequest,
    counter: TokenCounter,
    info: ModelInfo | None,
    around: tuple[str | None, str | None] = (None, None),
) -> dict[str, Any]:
    """The request page's values: the outcome and changes first, then the chat zone by zone."""
    messages = stored.assembled.get("messages") or []
    zoned = [
        (zone, [chat_message(i, m, counter.message(m)) for i, m in items]) for zone, items in zones(messages).items()
    ]
    return {
        "stored": stored,
        "zones": zoned,
        "tools_tokens": counter.tools(stored.assembled.get("tools")),
        "tools_sent": tool_names(stored.assembled.get("tools")),
        "lint": [d for d in stored.decisions if d.get("pass") == "lint_context"],
        "diff": diff_lines(stored),
        "usage": stored.summary,
        "outcome": outcome(stored, info),
        "changes": changes(stored),
        "budget": budget_rows(stored),
        "prev_id": around[0],
        "next_id": around[1],
        "as_json": _json(stored.to_dict()),
    }


def ui_router(gw: Gateway) -> APIRouter:
    router = APIRouter(prefix="/ui", dependencies=[Depends(require_ui_admin)])
    engines: dict[str, Engine] = {}

    def engine() -> Engine:
        if "read" not in engines:
            engines["read"] = make_engine(gw.settings.database_url)
        return engines["read"]

    def price(model_name: str) -> ModelInfo | None:
        model = gw.settings.model(model_name)
        return gw.info(model) if model is not None else None

    @router.get("")
    @router.get("/")
    async def _sessions(request: Request) -> HTMLResponse:
        form = SessionsForm.parse(request.query_params)
        page = await asyncio.to_thread(
            list_session_rows, engine(), form.filters(time.time()), offset=form.offset, limit=form.per_page
        )
        models, callers = await asyncio.to_thread(lambda: (models_seen(engine()), callers_seen(engine())))
        costs = {r.session_id: session_cost(r, price(r.model)) for r in page.rows}
        return _page("sessions.html", page=page, form=form, models=models, callers=callers, costs=costs)

    @router.get("/sessions/{session_id:path}")
    async def _session(session_id: str) -> HTMLResponse:
        turns = await asyncio.to_thread(session_turns, engine(), session_id)
        if not turns:
            return _missing("session", session_id)
        return _page("session.html", **session_page(session_id, turns))

    @router.get("/requests/{request_id}")
    async def _request(request_id: str) -> HTMLResponse:
        stored = await asyncio.to_thread(get_request, engine(), request_id)
        if stored is None:
            return _missing("request", request_id)
        model = gw.settings.model(stored.summary.model)
        counter = counter_for(model.tokenizer or encoding_for_model(model.litellm_model) if model else "o200k_base")
        around = await asyncio.to_thread(neighbours, engine(), stored.summary.session_id, stored.summary.created_at)
        # Counting every message and diffing two bodies is milliseconds for a long agent turn: a thread.
        values = await asyncio.to_thread(request_page, stored, counter, price(stored.summary.model), around)
        return _page("request.html", **values)

    return router


def _missing(what: str, ident: str) -> HTMLResponse:
    """A page for an id the store does not hold: a 404 a browser shows, not an API refusal."""
    return _page("missing.html", status_code=404, what=what, ident=ident)


def _json(value: Any) -> str:
    return orjson.dumps(value, option=orjson.OPT_INDENT_2, default=str).decode()
