"""Read the store: sessions, the requests of a session, one request with its full bodies.

The CLI (``ventana logs``, ``ventana inspect``), the inspector UI and replay build on
these functions and never on the tables directly, so the content-addressed layout
(blobs, message chains) stays an implementation detail of ``gateway/store``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

import orjson
from sqlalchemy import Connection, Engine, RowMapping, Select, func, select

from gateway.store.models import Blob, MessageNode, Request

DEFAULT_LIMIT = 50
MISSING = {"role": "system", "content": "<content pruned from the store>"}


@dataclass(frozen=True, slots=True)
class SessionSummary:
    session_id: str
    requests: int
    first_at: float
    last_at: float
    tokens_original: int
    tokens_assembled: int
    cached_tokens: int
    caller: str = ""  # a session is a caller's: two callers sending one session id have two


@dataclass(frozen=True, slots=True)
class RequestSummary:
    request_id: str
    session_id: str
    created_at: float
    model: str
    provider: str
    turn: int
    stream: bool
    status: int
    error: str | None
    tokens_original: int
    tokens_assembled: int
    prompt_tokens: int
    completion_tokens: int
    cached_tokens: int
    cache_write_tokens: int
    evaluated_tokens: int | None
    reused_tokens: int | None
    overhead_ms: float
    ttfb_ms: float | None
    total_ms: float
    replay_of: str | None
    caller: str
    route: str = "chat"
    compactions: int = 0  # compactions that went out (a reverted turn has none)
    reverted: bool = False  # the assembly was undone
    upstream_calls: int = 1  # every call a served-tool loop made (0: refused before forwarding)
    client_user: str | None = None  # the client's own ``user`` and metadata tags (store/client_tags.py)
    tags: str | None = None
    #: The summariser's share of the billed usage and its model (``summariser_share.py``)
    summarizer_model: str | None = None
    summarizer_prompt_tokens: int = 0
    summarizer_cached_tokens: int = 0
    summarizer_completion_tokens: int = 0

    @property
    def refused(self) -> bool:
        """Refused by the gateway before anything was forwarded (auth, rate limit, bad input...)."""
        return self.upstream_calls == 0 and self.status >= 400

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True, slots=True)
class StoredRequest:
    """One request as recorded: bodies rebuilt from their content-addressed parts."""

    summary: RequestSummary
    original: dict[str, Any]
    assembled: dict[str, Any]
    decisions: list[dict[str, Any]]
    response: dict[str, Any] | None
    response_text: str | None
    tool_calls: list[dict[str, Any]] | None
    finish_reason: str | None
    budget: dict[str, Any] | None

    def to_dict(self) -> dict[str, Any]:
        out = self.summary.to_dict()
        out.update(
            original=self.original,
            assembled=self.assembled,
            decisions=self.decisions,
            response=self.response,
            response_text=self.response_text,
            tool_calls=self.tool_calls,
            finish_reason=self.finish_reason,
            budget=self.budget,
        )
        return out


_SUMMARY_FIELDS = tuple(RequestSummary.__dataclass_fields__)


def _summary(row: RowMapping) -> RequestSummary:
    return RequestSummary(**{name: row[name] for name in _SUMMARY_FIELDS})


def list_sessions(engine: Engine, *, limit: int = DEFAULT_LIMIT, since: float | None = None) -> list[SessionSummary]:
    """Sessions, most recently active first."""
    last = func.max(Request.created_at)
    query = select(
        Request.session_id,
        func.count(),
        func.min(Request.created_at),
        last,
        func.sum(Request.tokens_original),
        func.sum(Request.tokens_assembled),
        func.sum(Request.cached_tokens),
        Request.caller,
    ).group_by(Request.caller, Request.session_id)
    if since is not None:
        query = query.where(Request.created_at >= since)
    with engine.connect() as conn:
        rows = conn.execute(query.order_by(last.desc()).limit(limit)).all()
    return [SessionSummary(r[0], r[1], r[2], r[3], int(r[4] or 0), int(r[5] or 0), int(r[6] or 0), r[7]) for r in rows]


def list_requests(
    engine: Engine,
    *,
    session: str | None = None,
    since: float | None = None,
    limit: int = DEFAULT_LIMIT,
    caller: str | None = None,
    request: str | None = None,
    until: float | None = None,
) -> list[RequestSummary]:
    """Requests, newest first, optionally of one session (of one ``caller``), not older than ``since``
    (unix s), or the one whose id starts with ``request`` (a refusal's id finds its record too)."""
    query = select(Request.__table__)
    if session is not None:
        query = query.where(Request.session_id == session)
    if caller is not None:
        query = query.where(Request.caller == caller)
    if request is not None:
        query = query.where(Request.__table__.c.request_id.startswith(request, autoescape=True))
    if since is not None:
        query = query.where(Request.created_at >= since)
    if until is not None:
        query = query.where(Request.created_at <= until)
    query = query.order_by(Request.created_at.desc(), Request.request_id).limit(limit)
    with engine.connect() as conn:
        return [_summary(row) for row in _requests(conn, query)]


def get_request(engine: Engine, request_id: str) -> StoredRequest | None:
    """The request with this id (a unique prefix of it is enough), or None."""
    with engine.connect() as conn:
        rows = _requests(conn, select(Request.__table__).where(Request.request_id == request_id))
        if not rows:
            like = (
                select(Request.__table__)
                .where(Request.__table__.c.request_id.startswith(request_id, autoescape=True))
                .limit(2)
            )
            rows = _requests(conn, like)
            if len(rows) != 1:
                return None
        row = rows[0]
        answer = _blob(conn, row["answer"])
        return StoredRequest(
            summary=_summary(row),
            original=_body(conn, row["original_params"], row["original_head"], row["original_tools"]),
            assembled=_body(conn, row["assembled_params"], row["assembled_head"], row["assembled_tools"]),
            decisions=list(row["decisions"] or ()),
            response=_response(row["response_meta"], answer),
            response_text=None if answer is None else answer.get("content"),
            tool_calls=None if answer is None else answer.get("tool_calls"),
            finish_reason=row["finish_reason"],
            budget=row["budget"],
        )


def messages_of(conn: Connection, head: str) -> list[dict[str, Any]]:
    """The ordered messages of the chain ending at ``head`` (one recursive query)."""
    if not head:
        return []
    node = MessageNode.__table__
    start = select(node.c.hash, node.c.parent, node.c.message, node.c.depth).where(node.c.hash == head)
    walk = start.cte("walk", recursive=True)
    walk = walk.union_all(
        select(node.c.hash, node.c.parent, node.c.message, node.c.depth).join(walk, node.c.hash == walk.c.parent)
    )
    query = select(walk.c.depth, Blob.content).outerjoin(Blob, Blob.hash == walk.c.message).order_by(walk.c.depth)
    return [orjson.loads(content) if content is not None else dict(MISSING) for _, content in conn.execute(query)]


def _requests(conn: Connection, query: Select[Any]) -> Sequence[RowMapping]:
    return conn.execute(query).mappings().all()


def _blob(conn: Connection, digest: str | None) -> Any:
    if digest is None:
        return None
    content = conn.scalar(select(Blob.content).where(Blob.hash == digest))
    return None if content is None else orjson.loads(content)


def _body(conn: Connection, params: dict[str, Any], head: str, tools: str | None) -> dict[str, Any]:
    body = dict(params)
    body["messages"] = messages_of(conn, head)
    if tools is not None:
        body["tools"] = _blob(conn, tools)
    return body


def _response(meta: dict[str, Any] | None, answer: dict[str, Any] | None) -> dict[str, Any] | None:
    if meta is None:
        return None
    choices = [dict(c) for c in meta.get("choices") or ()]
    if choices and answer is not None:
        choices[0]["message"] = answer
    return {**meta, "choices": choices}
