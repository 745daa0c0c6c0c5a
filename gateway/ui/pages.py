"""The inspector's routes: ``/ui`` (sessions), ``/ui/sessions/{id}`` (turns), ``/ui/requests/{id}``.

Server-rendered with Jinja2: no build step, no script fetched from anywhere. Every
route sits behind the admin guard; a browser may present the admin key as a bearer
header or as the session cookie set by ``POST /login`` (``ui/login.py``; outside ``/ui``
so that the login form itself is the only page reachable without a key).
"""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import orjson
from fastapi import APIRouter, Depends
from jinja2 import Environment, FileSystemLoader, pass_context, select_autoescape
from jinja2.runtime import Context as TemplateContext
from sqlalchemy import Engine
from starlette.requests import Request
from starlette.responses import HTMLResponse, Response

from gateway.api.deps import Gateway
from gateway.store.engine import make_engine
from gateway.store.figures import of_summary
from gateway.store.inspect_request import budget_rows, identity_diff, render_message, tool_difference, zone_runs
from gateway.store.queries import StoredRequest, get_request
from gateway.tokens import TokenCounter, counter_for, encoding_for_model
from gateway.ui.login import require_ui_admin
from gateway.ui.queries import (
    TurnRow,
    callers_seen,
    list_session_rows,
    models_seen,
    neighbours,
    requests_by_id,
    session_turns,
)
from gateway.ui.request_view import changes, chat_message, outcome, request_cost, tool_names
from gateway.ui.session_view import SessionsForm, turn_chart
from gateway.upstream.model_info import ModelInfo

#: In the order the context is laid out (the summary replaces the oldest history, so it comes first).
BAR_COMPONENTS = ("system", "tools", "summary", "history", "documents", "recalled", "query", "reminder")
_TEMPLATES = Environment(
    loader=FileSystemLoader(Path(__file__).parent / "templates"),
    autoescape=select_autoescape(["html"]),
    trim_blocks=True,
    lstrip_blocks=True,
)
_TEMPLATES.filters["t"] = lambda ts: time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(ts))
_TEMPLATES.filters["n"] = lambda v: f"{int(v or 0):,}"
_TEMPLATES.filters["pct"] = lambda v: f"{100 * float(v or 0):.0f}%"
_TEMPLATES.filters["usd"] = lambda v: usd(v)


@pass_context
def _who(context: TemplateContext, caller: str) -> str:
    """A caller as people know it: its key's configured name (``auth.key_names``), else the stored id."""
    return str((context.get("names") or {}).get(caller, caller))


_TEMPLATES.filters["who"] = _who


def usd(value: float | None) -> str:
    """A cost with enough digits to be non-zero: $0.0000 hid every cheap session's cost.

    >>> usd(0.000012345), usd(0.5), usd(12.3456), usd(0.0), usd(None)
    ('$0.00001234', '$0.5000', '$12.35', '$0', '–')
    """
    if value is None:
        return "–"
    if value == 0:
        return "$0"
    if abs(value) >= 10:
        return f"${value:,.2f}"
    if abs(value) >= 0.01:
        return f"${value:.4f}"
    return f"${value:.{max(4, 3 - math.floor(math.log10(abs(value))))}f}"


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


def session_page(
    session_id: str,
    turns: Sequence[TurnRow],
    *,
    caller: str | None = None,
    price: Callable[[str], ModelInfo | None] = lambda _: None,
) -> dict[str, Any]:
    """The session page's values: the chart, one bar per turn on a shared scale, the counts, and
    the totals billed (the sum of the turns' billed usage, as the list and ``ventana logs`` sum it),
    each turn priced at its model and its summariser calls at the summariser's model."""
    scale = max((t.prompt_tokens or t.tokens_assembled) for t in turns) or 1
    totals = SessionTotals(
        prompt_tokens=sum(t.prompt_tokens for t in turns),
        cached_tokens=sum(t.cached_tokens for t in turns),
        completion_tokens=sum(t.completion_tokens for t in turns),
        tokens_original=sum(t.tokens_original for t in turns),
        tokens_assembled=sum(t.tokens_assembled for t in turns),
    )
    return {
        "session_id": session_id,
        "caller": caller,
        "totals": totals,
        "cost": _sum_known(request_cost(t, price) for t in turns),
        "reverted": sum(t.reverted for t in turns),
        "served_calls": sum(max(t.upstream_calls - 1, 0) for t in turns),
        "rows": [(t, bar_segments(t.budget, scale), 100 * t.cached_tokens / scale) for t in turns],
        "chart": turn_chart(turns),
        "components": BAR_COMPONENTS,
        "first_compaction": next((t.turn for t in turns if t.compacted), None),
        "compactions": sum(t.compacted for t in turns),
        "tool_changes": sum(t.tool_set_changes for t in turns),
    }


def _sum_known(costs: Iterable[float | None]) -> float | None:
    """The sum of the costs with a known price (None when none has one)."""
    known = [c for c in costs if c is not None]
    return sum(known) if known else None


@dataclass(frozen=True, slots=True)
class SessionTotals:
    prompt_tokens: int
    cached_tokens: int
    completion_tokens: int
    tokens_original: int
    tokens_assembled: int

    @property
    def saved(self) -> int:
        return self.tokens_original - self.tokens_assembled


def diff_entries(stored: StoredRequest) -> list[tuple[str, str, list[str]]]:
    """(kind, line, full texts) per diff line: the tools' set difference, then the messages by
    identity with each folded range's full text one click away."""
    out: list[tuple[str, str, list[str]]] = [
        ("del" if line.startswith("-") else "add" if line.startswith("+") else "ctx", line, [])
        for line in tool_difference(stored)
    ]
    entries = identity_diff(
        stored.original.get("messages") or (), stored.assembled.get("messages") or (), limit=DIFF_LINE_CHARS
    )
    if all(e.kind == "kept" for e in entries):
        return out
    for e in entries:
        kind = {"kept": "ctx", "added": "add", "removed": "del", "summarised": "del", "cleared": "mod"}.get(e.kind)
        if e.kind == "replaced":
            kind = "add" if e.text.startswith("+") else "del"
        folded = len(e.removed) > 1 or len(e.added) > 1 or e.kind == "cleared"
        cut = any(len(render_message(m)) > DIFF_LINE_CHARS + 40 for _, m in (*e.removed, *e.added))
        full = [f"#{i} {render_message(m)}" for i, m in (*e.removed, *e.added)] if folded or cut else []
        out.append((kind or "ctx", e.text, full))
    return out


DIFF_LINE_CHARS = 300
FOLD_AT = 120  # a zone with more messages than this folds its middle run
FOLD_HEAD, FOLD_TAIL = 10, 50  # the messages of a folded zone shown before and after the fold


@dataclass(frozen=True, slots=True)
class Fold:
    """A run of messages the chat view leaves out: shown after ``at`` messages of its zone."""

    at: int
    count: int
    first: int  # message index of the first left out
    last: int
    tokens: int


def _folded(items: Sequence[tuple[int, Any]], counter: TokenCounter) -> tuple[Sequence[tuple[int, Any]], Fold | None]:
    if len(items) <= FOLD_AT:
        return items, None
    middle = items[FOLD_HEAD:-FOLD_TAIL]
    tokens = sum(counter.message(m) for _, m in middle)
    fold = Fold(FOLD_HEAD, len(middle), middle[0][0], middle[-1][0], tokens)
    return [*items[:FOLD_HEAD], *items[-FOLD_TAIL:]], fold


def request_page(
    stored: StoredRequest,
    counter: TokenCounter,
    price: Callable[[str], ModelInfo | None],
    around: tuple[str | None, str | None] = (None, None),
    *,
    show_all: bool = False,
) -> dict[str, Any]:
    """The request page's values: the outcome and changes first, then the chat zone by zone.

    A zone longer than ``FOLD_AT`` messages shows its first and newest ones and folds the run between
    to one line (``show_all``: every message): a 500-turn chat is 1,000 messages the reader scrolls past."""
    messages = stored.assembled.get("messages") or []
    zoned = []
    for zone, items in zone_runs(messages):
        shown, fold = _folded(items, counter) if not show_all else (items, None)
        tokens = sum(counter.message(m) for _, m in items)
        zoned.append((zone, [chat_message(i, m, counter.message(m)) for i, m in shown], fold, tokens))
    return {
        "stored": stored,
        "zones": zoned,
        "tools_tokens": counter.tools(stored.assembled.get("tools")),
        "tools_sent": tool_names(stored.assembled.get("tools")),
        "lint": [d for d in stored.decisions if d.get("pass") == "lint_context"],
        "diff": diff_entries(stored),
        "usage": stored.summary,
        "outcome": outcome(stored, price),
        "changes": changes(stored),
        "figures": of_summary(stored.summary, stored.decisions, stored.budget),
        "budget": budget_rows(stored),
        "prev_id": around[0],
        "next_id": around[1],
    }


def ui_router(gw: Gateway) -> APIRouter:
    router = APIRouter(prefix="/ui", dependencies=[Depends(require_ui_admin)])
    engines: dict[str, Engine] = {}
    names = gw.settings.auth.caller_names

    def engine() -> Engine:
        if "read" not in engines:
            engines["read"] = make_engine(gw.settings.database_url)
        return engines["read"]

    def price(model_name: str) -> ModelInfo | None:
        model = gw.settings.model(model_name)
        return gw.info(model) if model is not None else None

    def prices() -> dict[str, tuple[float, float, float]]:
        out = {}
        for m in gw.settings.models:
            info = gw.info(m)
            out[m.name] = (info.input_cost_per_token, info.cache_read_cost_per_token, info.output_cost_per_token)
        return out

    @router.get("")
    @router.get("/")
    async def _sessions(request: Request) -> HTMLResponse:
        form = SessionsForm.parse(request.query_params)

        def read() -> Any:
            filters = form.filters(time.time())
            page = list_session_rows(engine(), filters, offset=form.offset, limit=form.per_page, prices=prices())
            if not page.rows and page.total and form.offset >= page.total:  # past the end: the last page
                last = form.within(page.total)
                page = list_session_rows(engine(), filters, offset=last.offset, limit=last.per_page, prices=prices())
                return last, page
            return form, page

        shown, page = await asyncio.to_thread(read)
        hits = await asyncio.to_thread(requests_by_id, engine(), form.q) if form.q else []
        models, callers = await asyncio.to_thread(lambda: (models_seen(engine()), callers_seen(engine())))
        costs = {(r.caller, r.session_id): r.cost for r in page.rows}
        return _page(
            "sessions.html", page=page, form=shown, models=models, callers=callers, costs=costs, hits=hits, names=names
        )

    @router.get("/sessions/{session_id:path}")
    async def _session(request: Request, session_id: str) -> HTMLResponse:
        caller = request.query_params.get("caller") or None
        user = request.query_params.get("user", "").strip() or None
        tag = request.query_params.get("tag", "").strip() or None
        turns = await asyncio.to_thread(partial(session_turns, caller=caller, user=user, tag=tag), engine(), session_id)
        if not turns:
            return _missing("session", session_id)
        values = session_page(session_id, turns, caller=caller, price=price)
        only = [label for label in (f"user {user}" if user else "", f"tag {tag}" if tag else "") if label]
        return _page("session.html", **values, only=only, names=names)

    @router.get("/requests/{request_id}")
    async def _request(request: Request, request_id: str) -> HTMLResponse:
        stored = await asyncio.to_thread(get_request, engine(), request_id)
        if stored is None:
            return _missing("request", request_id)
        model = gw.settings.model(stored.summary.model)
        counter = counter_for(model.tokenizer or encoding_for_model(model.litellm_model) if model else "o200k_base")
        s = stored.summary
        around = await asyncio.to_thread(neighbours, engine(), s.session_id, s.created_at, s.caller)
        # Counting every message and diffing two bodies is milliseconds for a long agent turn: a thread.
        show_all = request.query_params.get("all") == "1"
        values = await asyncio.to_thread(partial(request_page, show_all=show_all), stored, counter, price, around)
        return _page("request.html", **values, names=names)

    @router.get("/requests/{request_id}/json")
    async def _request_json(request_id: str) -> Response:
        """The stored request as JSON, fetched when the page's JSON box is opened: it is as long as the
        page itself for a 500-turn chat (both bodies), and most readers never open it."""
        stored = await asyncio.to_thread(get_request, engine(), request_id)
        if stored is None:
            return _missing("request", request_id)
        return Response(_json(stored.to_dict()), media_type="application/json")

    @router.get("/{rest:path}")
    async def _nothing(rest: str) -> HTMLResponse:
        """Any other path under /ui: a page saying so, not the API's JSON 404."""
        return _missing("page", "/ui/" + rest)

    return router


def _missing(what: str, ident: str) -> HTMLResponse:
    """A page for an id the store does not hold: a 404 a browser shows, not an API refusal."""
    return _page("missing.html", status_code=404, what=what, ident=ident)


def _json(value: Any) -> str:
    return orjson.dumps(value, option=orjson.OPT_INDENT_2, default=str).decode()
