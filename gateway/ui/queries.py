"""The inspector's reads: per-session aggregates and one row per turn, each in one SQL query.

Kept apart from ``store/queries.py`` because they are shaped for pages (a session list
with compactions and errors, a 500-turn session without rebuilding any message body).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sqlalchemy import Engine, Text, case, cast, func, or_, select

from gateway.store.models import Request


@dataclass(frozen=True, slots=True)
class SessionRow:
    session_id: str
    model: str
    first_at: float
    last_at: float
    turns: int
    tokens_original: int
    tokens_assembled: int
    prompt_tokens: int
    cached_tokens: int
    compactions: int
    errors: int

    @property
    def cache_hit_ratio(self) -> float:
        return self.cached_tokens / self.prompt_tokens if self.prompt_tokens else 0.0

    @property
    def saved_share(self) -> float:
        return 1 - self.tokens_assembled / self.tokens_original if self.tokens_original else 0.0


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

    def has(self, pass_name: str, action: str) -> bool:
        return any(d.get("pass") == pass_name and d.get("action") == action for d in self.decisions)

    @property
    def compacted(self) -> bool:
        return self.has("compact_history", "compacted") or self.has("compact_history", "checkpoint_reused")

    @property
    def tool_set_changed(self) -> bool:
        return self.has("prune_tools", "tool_set_changed")


def list_session_rows(
    engine: Engine, *, search: str | None = None, model: str | None = None, limit: int = 200
) -> list[SessionRow]:
    decisions_text = cast(Request.decisions, Text)
    last = func.max(Request.created_at)
    query = select(
        Request.session_id,
        func.max(Request.model),
        func.min(Request.created_at),
        last,
        func.count(),
        func.sum(Request.tokens_original),
        func.sum(Request.tokens_assembled),
        func.sum(Request.prompt_tokens),
        func.sum(Request.cached_tokens),
        func.sum(case((decisions_text.like('%"compacted"%'), 1), else_=0)),
        func.sum(case((Request.status >= 400, 1), else_=0)),
    ).group_by(Request.session_id)
    if search:
        pattern = f"%{search}%"
        query = query.where(or_(Request.session_id.like(pattern), Request.request_id.like(pattern)))
    if model:
        query = query.where(Request.model == model)
    with engine.connect() as conn:
        rows = conn.execute(query.order_by(last.desc()).limit(limit)).all()
    return [SessionRow(r[0], r[1], r[2], r[3], r[4], *(int(v or 0) for v in r[5:])) for r in rows]


def session_turns(engine: Engine, session_id: str, *, limit: int = 2000) -> list[TurnRow]:
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
    )
    query = select(*columns).where(Request.session_id == session_id).order_by(Request.created_at).limit(limit)
    with engine.connect() as conn:
        rows = conn.execute(query).all()
    return [TurnRow(r[0], r[1], r[2], r[3], r[4], r[5], r[6], r[7], r[8], list(r[9] or ())) for r in rows]


def models_seen(engine: Engine) -> list[str]:
    with engine.connect() as conn:
        return [r[0] for r in conn.execute(select(Request.model).distinct().order_by(Request.model))]
