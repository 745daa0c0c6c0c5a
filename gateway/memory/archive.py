"""Episodic memory: archive the history compaction replaced, verbatim, and search it by the question.

A compacted range is cut into passages, one per user turn (a user message and the
assistant and tool messages that answer it), a long turn into pieces of about
``passage_tokens`` on sentence boundaries. Each passage keeps its session, its owner,
its original message indices and its turn numbers, and its BM25 terms (the lexical
index), in ``memory_passages``. Archiving is idempotent: a passage is keyed by
(session, first message, piece), so a range archived again (hierarchical compaction
re-covers earlier turns) adds only what is new.

Each passage also keeps the date it was said on when the conversation states one (``dated``:
the newest short dated message at or before it, such as "[new session, 2024-01-12]") and, when
the bundled encoder is installed, its MiniLM vector (``memory/vectors.py``), computed in an archive
task, a bounded number a task (``embed_missing``), never per request.

Search loads the session's (or the owner's) passages and ranks them (``memory/rank.py``): BM25
on the 0-1 scale of ``assembly/text_relevance.py`` fused with the embedding's cosine, a share of
the neighbouring turn's score, dated turns first for a question about time, and nothing that
only resembles the newest turns the model still sees. A session holds at most a few hundred.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any, cast

import numpy as np
from sqlalchemy import Engine, Table, bindparam, select, update

from gateway.assembly.memory_blocks import Passage
from gateway.assembly.message_text import text_of
from gateway.assembly.text_relevance import terms, windows
from gateway.assembly.verify_assembly import is_gateway_block
from gateway.memory import rank, vectors
from gateway.store.engine import insert_for
from gateway.store.models import MemoryPassage
from gateway.summarize.transcript import render_transcript

passages_table = cast(Table, MemoryPassage.__table__)
#: At most this many passages of one session (or owner) are ranked per search, newest kept.
MAX_RANKED = 2000
#: A message this short that states a date marks when what follows was said ("[new session, 2024-01-12]").
MAX_DATE_MARK_CHARS = 80
DATE_LOOKBACK = 400


def date_mark(messages: Sequence[Mapping[str, Any]], at: int) -> str:
    """The newest short dated message at or before ``at`` (its text, "" when the history states none)."""
    for i in range(min(at, len(messages) - 1), max(-1, at - DATE_LOOKBACK), -1):
        text = text_of(messages[i].get("content")).strip()
        if 0 < len(text) <= MAX_DATE_MARK_CHARS and rank.has_date(text):
            return text
    return ""


def turn_numbers(messages: Sequence[Mapping[str, Any]]) -> list[int]:
    """The user turn (1-based; 0 before the first user message) each message belongs to."""
    turn, out = 0, []
    for m in messages:
        if m.get("role") == "user" and not is_gateway_block(m):
            turn += 1
        out.append(turn)
    return out


def passages_of(
    messages: Sequence[Mapping[str, Any]], start: int, end: int, size: int, count: Callable[[str], int]
) -> list[dict[str, Any]]:
    """Rows for ``messages[start:end]``: one per turn, long turns cut into pieces of about ``size`` tokens."""
    turns = turn_numbers(messages)
    rows: list[dict[str, Any]] = []
    i = start
    while i < min(end, len(messages)):
        j = i + 1
        while j < end and turns[j] == turns[i]:
            j += 1
        text = render_transcript(messages[i:j])
        dated = date_mark(messages, i)
        for part, piece in enumerate(windows(text, size, 0, count) if text else []):
            rows.append(
                {
                    "start": i,
                    "end": j,
                    "part": part,
                    "turn_start": turns[i],
                    "turn_end": turns[j - 1],
                    "text": piece.strip(),
                    "terms": " ".join(terms(piece)),
                    "dated": dated[:MAX_DATE_MARK_CHARS] or None,
                }
            )
        i = j
    return rows


def embed(rows: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """``rows`` with their MiniLM vectors (``vector`` None when the encoder is not installed): every passage at
    once, as benchmarks and tests archive a conversation; the gateway's archive task bounds it (``embed_missing``).

    CPU-bound (about 0.1 s a passage on one core): never on the loop."""
    found = vectors.encode([str(r["text"]) for r in rows]) if rows else None
    return [{**r, "vector": vectors.to_bytes(found[k]) if found is not None else None} for k, r in enumerate(rows)]


def archive(engine: Engine, session_id: str, owner: str, rows: Sequence[Mapping[str, Any]]) -> int:
    """Store ``rows`` for the session, skipping passages already archived; return how many were new."""
    if not rows:
        return 0
    now = time.time()
    values = [{**r, "session_id": session_id, "owner": owner, "created_at": now} for r in rows]
    stmt = insert_for(engine, passages_table).values(values)
    stmt = stmt.on_conflict_do_nothing(index_elements=["session_id", "start", "part"])
    with engine.begin() as conn:  # the ids of the rows inserted (psycopg's rowcount reads 0 here)
        return len(conn.execute(stmt.returning(passages_table.c.id)).all())


def embed_missing(engine: Engine, session_id: str, limit: int) -> int:
    """Give vectors to up to ``limit`` of the session's passages stored without one, newest first; how many.

    The archive task of a large compaction would otherwise embed every passage (~0.05-0.1 s each: 35 s for
    the 369 passages of a 105K-token agent history) while the session's next turn waits for it. Bounded per
    task, the rest are ranked by their words until a later archive of the session gives them vectors, in the
    same order, so what a turn ranks with depends on the turns before it, never on timing."""
    if limit <= 0 or not vectors.available():
        return 0
    t = passages_table.c
    query = (
        select(t.id, t.text)
        .where(t.session_id == session_id, t.vector.is_(None))
        .order_by(t.start.desc(), t.part.desc())
        .limit(limit)
    )
    with engine.connect() as conn:
        rows = conn.execute(query).all()
    found = vectors.encode([r.text for r in rows]) if rows else None
    if found is None:
        return 0
    stmt = update(passages_table).where(t.id == bindparam("row_id")).values(vector=bindparam("row_vector"))
    with engine.begin() as conn:
        conn.execute(stmt, [{"row_id": r.id, "row_vector": vectors.to_bytes(found[k])} for k, r in enumerate(rows)])
    return len(rows)


def search(
    engine: Engine,
    question: str,
    *,
    session_id: str | None = None,
    owner: str | None = None,
    tail: Sequence[str] = (),
) -> list[Passage]:
    """Every archived passage of the session (or owner) with its score against ``question``, best first.

    ``tail``: the newest turns the model still sees (rendered as passages are); a passage that
    only resembles them (``rank.resembles_tail``) scores 0."""
    t = passages_table.c
    query = select(
        t.id, t.session_id, t.start, t.end, t.part, t.turn_start, t.turn_end, t.text, t.terms, t.dated, t.vector
    )
    if session_id is not None:
        query = query.where(t.session_id == session_id)
    if owner is not None:
        query = query.where(t.owner == owner)
    with engine.connect() as conn:
        rows = conn.execute(query.order_by(t.id.desc()).limit(MAX_RANKED)).all()
    if not rows:
        return []
    rows = sorted(rows, key=lambda r: (r.session_id, r.start, r.part))
    question_vector = _question_vector(question, rows)
    stored = [vectors.from_bytes(r.vector) if question_vector is not None else None for r in rows]
    tail_vectors: list[np.ndarray | None] = [None] * len(tail)
    if question_vector is not None and tail:
        encoded = vectors.encode_memo(tail)
        tail_vectors = list(encoded) if encoded is not None else tail_vectors
    tail_terms = [terms(x) for x in tail]
    corpus = [*(r.terms.split() for r in rows), *tail_terms]
    fused, meaning = rank.fused_scores(question, corpus, [*stored, *tail_vectors], question_vector)
    own = rank.keep_meaning_rank(fused[: len(rows)], meaning[: len(rows)])
    novel = set(terms(question)) - {t for ts in tail_terms for t in ts}
    tail_sets = [set(ts) for ts in tail_terms]
    tail_meaning = max(meaning[len(rows) :], default=0.0)
    near = [
        (
            i - 1 if i > 0 and rows[i - 1].session_id == r.session_id else -1,
            i + 1 if i + 1 < len(rows) and rows[i + 1].session_id == r.session_id else -1,
        )
        for i, r in enumerate(rows)
    ]
    timed = rank.is_time_question(question)
    dated = [rank.has_date(r.text) for r in rows] if timed else [False] * len(rows)  # a scan only when asked when
    asked = frozenset(terms(question))
    row_terms = [set(r.terms.split()) for r in rows]
    sharper = list({frozenset(ts & asked) for ts in row_terms if ts & novel}) if novel and tail_sets else []
    echo = [
        rank.resembles_tail(ts, novel, meaning[i], tail_meaning, tail_sets, sharper, asked)
        for i, ts in enumerate(row_terms)
    ]
    kept = [0.0 if e else o for e, o in zip(echo, own, strict=True)]
    scores = rank.with_context(kept, near, dated, timed)
    alone = rank.with_context(kept, [(-1, -1)] * len(rows), dated, timed)  # the same without the neighbour's share
    found = [
        Passage(
            r.id,
            r.session_id,
            r.start,
            r.end,
            r.turn_start,
            r.turn_end,
            r.text,
            0.0 if echo[i] else score,
            dated=r.dated or "",
            own=0.0 if echo[i] else alone[i],
        )
        for i, (r, score) in enumerate(zip(rows, scores, strict=True))
    ]
    return sorted(found, key=lambda p: (-p.score, p.start, p.passage_id))


def _question_vector(question: str, rows: Sequence[Any]) -> np.ndarray | None:
    """The question's vector when the archive has vectors to compare it with (else None: BM25 alone)."""
    if not question.strip() or not any(r.vector for r in rows):
        return None
    found = vectors.encode_memo([question])
    return None if found is None else found[0]


def archived_count(engine: Engine, *, session_id: str | None = None, owner: str | None = None) -> int:
    from sqlalchemy import func

    from gateway.memory.profile import owner_matches

    query = select(func.count()).select_from(passages_table)
    if session_id is not None:
        query = query.where(passages_table.c.session_id == session_id)
    if owner is not None:
        query = query.where(owner_matches(passages_table.c.owner, owner))
    with engine.connect() as conn:
        return int(conn.execute(query).scalar_one())
