"""The inspector's reads: per-session aggregates and one row per turn, each in one SQL query.

Kept apart from ``store/queries.py`` because they are shaped for pages (a session list
with compactions and errors, a 500-turn session without rebuilding any message body).
The sessions list is filtered, sorted and paged in SQL, with its total, so a store of
thousands of sessions shows every one of them a page at a time.
"""

from __future__ import annotations

from collections.abc import Container, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

import orjson
from sqlalchemy import ColumnElement, Connection, Engine, case, func, or_, select

from gateway.decision_tally import tally_decisions
from gateway.store.client_tags import tag_list, tag_pattern
from gateway.store.models import Blob, MessageNode, Request

PAGE_SIZE = 100
PREVIEW_CHARS = 120
#: How far back from a session's last message the preview looks for a user message.
PREVIEW_STEPS = 12


@dataclass(frozen=True, slots=True)
class SessionRow:
    session_id: str
    model: str
    caller: str
    first_at: float
    last_at: float
    turns: int
    tokens_original: int
    tokens_assembled: int
    prompt_tokens: int
    cached_tokens: int
    completion_tokens: int
    compactions: int
    errors: int
    preview: str = ""
    user: str | None = None  # the client's ``user`` (its newest, if it changed)
    tags: list[str] = field(default_factory=list)  # the client's metadata tags, "key=value"
    #: The provider cost of the matching requests, each at its model's prices and its summariser calls at
    #: the summariser model's (None: the list was read without prices)
    cost: float | None = None

    @property
    def cache_hit_ratio(self) -> float:
        return self.cached_tokens / self.prompt_tokens if self.prompt_tokens else 0.0

    @property
    def tokens_saved(self) -> int:
        return self.tokens_original - self.tokens_assembled

    @property
    def saved_share(self) -> float:
        return 1 - self.tokens_assembled / self.tokens_original if self.tokens_original else 0.0


@dataclass(frozen=True, slots=True)
class SessionFilter:
    """What the sessions list shows: each field is one control of the page's filter form."""

    search: str | None = None
    model: str | None = None
    caller: str | None = None
    status: str | None = None  # "errors" (has an error), "ok" (none), None (all)
    since: float | None = None  # unix s: sessions active at or after this time
    until: float | None = None  # unix s: sessions active at or before this time
    user: str | None = None  # the client's ``user``, exactly
    tag: str | None = None  # one metadata tag, "key=value"
    sort: str = "last"
    descending: bool = True


@dataclass(frozen=True, slots=True)
class SessionPage:
    rows: list[SessionRow]
    total: int
    offset: int


@dataclass(frozen=True, slots=True)
class TurnRow:
    request_id: str
    turn: int
    created_at: float
    status: int
    tokens_original: int
    tokens_assembled: int
    prompt_tokens: int
    cached_tokens: int
    budget: dict[str, Any] | None
    decisions: list[dict[str, Any]]
    compactions: int = 0  # as stored: compactions that went out
    reverted: bool = False
    route: str = "chat"
    upstream_calls: int = 1
    completion_tokens: int = 0
    model: str = ""
    summarizer_model: str | None = None  # the summariser's share of the billed usage (summariser_share.py)
    summarizer_prompt_tokens: int = 0
    summarizer_cached_tokens: int = 0
    summarizer_completion_tokens: int = 0

    def has(self, pass_name: str, action: str) -> bool:
        return any(d.get("pass") == pass_name and d.get("action") == action for d in self.decisions)

    @property
    def compacted(self) -> bool:
        """This turn replaced a range by a summary that went out (not: it resent a summary an earlier
        turn made, nor a compaction its revert undid)."""
        return self.compactions > 0

    @property
    def summary_reused(self) -> bool:
        return self.has("compact_history", "checkpoint_reused")

    @property
    def tool_set_changes(self) -> int:
        """Changes of the tool set this turn, counted as the metric counts them (``decision_tally``): a new
        pruned set (the session's first is no change) and each set a served ``find_tools`` search grew."""
        return tally_decisions(self.decisions).tool_set_changes

    @property
    def tool_set_changed(self) -> bool:
        return self.tool_set_changes > 0


_LAST = func.max(Request.created_at)
_ERRORS = func.sum(case((Request.status >= 400, 1), else_=0))
_SAVED = func.sum(Request.tokens_original) - func.sum(Request.tokens_assembled)
_COMPACTIONS = func.sum(Request.compactions)  # compactions that went out: a reverted turn stored 0
SORTS: dict[str, ColumnElement[Any]] = {
    "last": _LAST,
    "first": func.min(Request.created_at),
    "turns": func.count(),
    "tokens": func.sum(Request.tokens_original),
    "saved": _SAVED,
    "prompt": func.sum(Request.prompt_tokens),
    "compactions": _COMPACTIONS,
    "errors": _ERRORS,
    "cache": func.sum(Request.cached_tokens) * 1.0 / func.nullif(func.sum(Request.prompt_tokens), 0),
    "model": func.max(Request.model),
    "caller": func.max(Request.caller),
    "completion": func.sum(Request.completion_tokens),
}


def _grouped(filters: SessionFilter) -> Any:
    query: Any = select(  # Select of 13 columns; typed per column by SQLAlchemy 2.1
        Request.session_id,
        func.max(Request.model),
        Request.caller,
        func.min(Request.created_at),
        _LAST,
        func.count(),
        func.sum(Request.tokens_original),
        func.sum(Request.tokens_assembled),
        func.sum(Request.prompt_tokens),
        func.sum(Request.cached_tokens),
        func.sum(Request.completion_tokens),
        _COMPACTIONS,
        _ERRORS,
        func.max(Request.client_user),
        func.max(Request.tags),
    ).group_by(Request.caller, Request.session_id)  # two callers' sessions of one name are two sessions
    if filters.search:
        pattern = f"%{filters.search}%"
        # Sessions whose id, any request id or any message text matches, aggregated over all their requests.
        by_text = (
            select(MessageNode.hash)
            .join(Blob, Blob.hash == MessageNode.message)
            .where(Blob.kind.in_(("message", "answer")), Blob.content.like(pattern))
        )
        matching = select(Request.session_id).where(
            or_(
                Request.session_id.like(pattern),
                Request.request_id.like(pattern),
                Request.original_head.in_(by_text),
                Request.answer.in_(select(Blob.hash).where(Blob.kind == "answer", Blob.content.like(pattern))),
            )
        )
        query = query.where(Request.session_id.in_(matching))
    if filters.model:
        query = query.where(Request.model == filters.model)
    if filters.caller:
        query = query.where(Request.caller == filters.caller)
    if filters.user:
        query = query.where(Request.client_user == filters.user)
    if filters.tag:
        query = query.where(Request.tags.like(tag_pattern(filters.tag), escape="\\"))
    if filters.status == "errors":
        query = query.having(_ERRORS > 0)
    elif filters.status == "ok":
        query = query.having(_ERRORS == 0)
    if filters.since is not None:
        query = query.having(filters.since <= _LAST)
    if filters.until is not None:  # active within [since, until]: began before its end, went on past its start
        query = query.having(func.min(Request.created_at) <= filters.until)
    return query


def cost_expression(prices: Mapping[str, tuple[float, float, float]]) -> ColumnElement[Any] | None:
    """A session's provider cost in SQL, from each model's (input, cache read, output) price per token.

    Each request's own tokens at its model's prices; its summariser calls' share (``summariser_share``)
    at the summariser model's, or at the request's model's when the summariser has no price here."""
    if not prices:
        return None
    r = Request.__table__.c
    own = (
        r.prompt_tokens - r.summarizer_prompt_tokens - (r.cached_tokens - r.summarizer_cached_tokens),
        r.cached_tokens - r.summarizer_cached_tokens,
        r.completion_tokens - r.summarizer_completion_tokens,
    )
    share = (
        r.summarizer_prompt_tokens - r.summarizer_cached_tokens,
        r.summarizer_cached_tokens,
        r.summarizer_completion_tokens,
    )

    def at(column: ColumnElement[Any], tokens: tuple[Any, Any, Any], else_: Any) -> Any:
        whens: list[tuple[ColumnElement[bool], Any]] = [
            (column == model, tokens[0] * p_in + tokens[1] * p_cache + tokens[2] * out)
            for model, (p_in, p_cache, out) in prices.items()
        ]
        return case(*whens, else_=else_)

    share_at_request_model = at(r.model, share, 0.0)
    per_request = at(r.model, own, 0.0) + at(r.summarizer_model, share, share_at_request_model)
    return func.sum(per_request)


def list_session_rows(
    engine: Engine,
    filters: SessionFilter | None = None,
    *,
    offset: int = 0,
    limit: int = PAGE_SIZE,
    prices: Mapping[str, tuple[float, float, float]] | None = None,
) -> SessionPage:
    """One page of sessions matching ``filters``, sorted, with the total that match.

    A session is a (caller, session id) pair everywhere: two callers that send the same
    ``X-Session-Id`` have two sessions. ``prices`` let the list sort by cost in SQL."""
    cost = cost_expression(prices or {})
    filters = filters or SessionFilter()
    grouped = _grouped(filters)
    key = cost if filters.sort == "cost" and cost is not None else SORTS.get(filters.sort, _LAST)
    order = (key.desc() if filters.descending else key.asc(), Request.session_id, Request.caller)
    priced = {m for m, p in (prices or {}).items() if any(p)}
    with engine.connect() as conn:
        total = int(conn.scalar(select(func.count()).select_from(grouped.subquery())) or 0)
        shown = grouped if cost is None else grouped.add_columns(cost)
        rows = conn.execute(shown.order_by(*order).offset(max(offset, 0)).limit(limit)).all()
        out = [_session_row(r, _preview(conn, r[0], r[2]), priced) for r in rows]
    return SessionPage(out, total, max(offset, 0))


def _session_row(r: Any, preview: str, priced: Container[str] = ()) -> SessionRow:
    n = [int(v or 0) for v in r[6:13]]
    row = SessionRow(r[0], r[1], r[2], r[3], r[4], int(r[5]), n[0], n[1], n[2], n[3], n[4], n[5], n[6], preview)
    cost = float(r[15] or 0.0) if len(r) > 15 and row.model in priced else None  # no price known: no cost
    return replace(row, user=r[13], tags=tag_list(r[14]), cost=cost)


def _preview(conn: Connection, session_id: str, caller: str) -> str:
    """The start of the session's last user message: walk back from its newest request's last message."""
    node = conn.scalar(
        select(Request.original_head)
        .where(Request.session_id == session_id, Request.caller == caller)
        .order_by(Request.created_at.desc())
        .limit(1)
    )
    for _ in range(PREVIEW_STEPS):
        if not node:
            return ""
        found = conn.execute(
            select(MessageNode.parent, Blob.content)
            .join(Blob, Blob.hash == MessageNode.message, isouter=True)
            .where(MessageNode.hash == node)
        ).first()
        if found is None:
            return ""
        parent, content = found
        message = orjson.loads(content) if content else {}
        if message.get("role") == "user":
            return _text(message.get("content"))[:PREVIEW_CHARS]
        node = parent
    return ""


def _text(content: Any) -> str:
    if isinstance(content, str):
        return " ".join(content.split())
    if isinstance(content, list):
        parts = [
            p.get("text", "") if p.get("type") == "text" else f"[{p.get('type')}]"
            for p in content
            if isinstance(p, dict)
        ]
        return " ".join(" ".join(parts).split())
    return ""


def session_turns(
    engine: Engine,
    session_id: str,
    *,
    limit: int = 2000,
    caller: str | None = None,
    user: str | None = None,
    tag: str | None = None,
) -> list[TurnRow]:
    """The turns of one session: of one caller when ``caller`` is given (a session is a caller's); with
    ``user`` or ``tag``, only the turns the client labelled so, as the list's row reached from a filter
    totals them."""
    columns = (
        Request.request_id,
        Request.turn,
        Request.created_at,
        Request.status,
        Request.tokens_original,
        Request.tokens_assembled,
        Request.prompt_tokens,
        Request.cached_tokens,
        Request.budget,
        Request.decisions,
        Request.compactions,
        Request.reverted,
        Request.route,
        Request.upstream_calls,
        Request.completion_tokens,
        Request.model,
        Request.summarizer_model,
        Request.summarizer_prompt_tokens,
        Request.summarizer_cached_tokens,
        Request.summarizer_completion_tokens,
    )
    query = select(*columns).where(Request.session_id == session_id)
    if caller is not None:
        query = query.where(Request.caller == caller)
    if user:
        query = query.where(Request.client_user == user)
    if tag:
        query = query.where(Request.tags.like(tag_pattern(tag), escape="\\"))
    query = query.order_by(Request.created_at).limit(limit)
    with engine.connect() as conn:
        rows = conn.execute(query).all()
    return [_turn_row(r) for r in rows]


def _turn_row(r: Any) -> TurnRow:
    return TurnRow(
        r[0],
        r[1],
        r[2],
        r[3],
        r[4],
        r[5],
        r[6],
        r[7],
        r[8],
        list(r[9] or ()),
        compactions=int(r[10] or 0),
        reverted=bool(r[11]),
        route=str(r[12]),
        upstream_calls=int(r[13] or 0),
        completion_tokens=int(r[14] or 0),
        model=str(r[15]),
        summarizer_model=r[16],
        summarizer_prompt_tokens=int(r[17] or 0),
        summarizer_cached_tokens=int(r[18] or 0),
        summarizer_completion_tokens=int(r[19] or 0),
    )


def models_seen(engine: Engine) -> list[str]:
    with engine.connect() as conn:
        return [r[0] for r in conn.execute(select(Request.model).distinct().order_by(Request.model))]


def callers_seen(engine: Engine) -> list[str]:
    with engine.connect() as conn:
        return [r[0] for r in conn.execute(select(Request.caller).distinct().order_by(Request.caller))]


def neighbours(
    engine: Engine, session_id: str, created_at: float, caller: str | None = None
) -> tuple[str | None, str | None]:
    """The request ids of the session's turn before and after the one made at ``created_at``."""
    same = Request.session_id == session_id
    if caller is not None:
        same = same & (Request.caller == caller)
    with engine.connect() as conn:
        prev_id = conn.scalar(
            select(Request.request_id)
            .where(same, Request.created_at < created_at)
            .order_by(Request.created_at.desc())
            .limit(1)
        )
        next_id = conn.scalar(
            select(Request.request_id)
            .where(same, Request.created_at > created_at)
            .order_by(Request.created_at)
            .limit(1)
        )
    return prev_id, next_id


@dataclass(frozen=True, slots=True)
class RequestHit:
    request_id: str
    session_id: str
    caller: str
    route: str
    status: int
    error: str | None


def requests_by_id(engine: Engine, prefix: str, *, limit: int = 5) -> list[RequestHit]:
    """Requests whose id starts with ``prefix``: a client holding a request id (a refusal's too) finds it."""
    if len(prefix) < 6:  # "req-" alone would match every request
        return []
    query = (
        select(Request.request_id, Request.session_id, Request.caller, Request.route, Request.status, Request.error)
        .where(Request.__table__.c.request_id.startswith(prefix, autoescape=True))
        .order_by(Request.request_id)
        .limit(limit)
    )
    with engine.connect() as conn:
        return [RequestHit(*r) for r in conn.execute(query).all()]
