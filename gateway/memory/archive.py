"""Episodic memory: archive the history compaction replaced, verbatim, and search it by the question.

A compacted range is cut into passages, one per user turn (a user message and the
assistant and tool messages that answer it), a long turn into pieces of about
``passage_tokens`` on sentence boundaries. Each passage keeps its session, its owner,
its original message indices and its turn numbers, and its BM25 terms (the lexical
index), in ``memory_passages``. Archiving is idempotent: a passage is keyed by
(session, first message, piece), so a range archived again (hierarchical compaction
re-covers earlier turns) adds only what is new.

Search loads the session's (or the owner's) passages and ranks them with BM25 on the
0-1 scale of ``assembly/text_relevance.py``; a session holds at most a few hundred.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any, cast

from sqlalchemy import Engine, Table, select

from gateway.assembly.memory_blocks import Passage
from gateway.assembly.text_relevance import term_scores, terms, windows
from gateway.assembly.verify_assembly import is_gateway_block
from gateway.store.engine import insert_for
from gateway.store.models import MemoryPassage
from gateway.summarize.transcript import render_transcript

passages_table = cast(Table, MemoryPassage.__table__)
#: At most this many passages of one session (or owner) are ranked per search, newest kept.
MAX_RANKED = 2000


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
                }
            )
        i = j
    return rows


def archive(engine: Engine, session_id: str, owner: str, rows: Sequence[Mapping[str, Any]]) -> int:
    """Store ``rows`` for the session, skipping passages already archived; return how many were offered."""
    if not rows:
        return 0
    now = time.time()
    values = [{**r, "session_id": session_id, "owner": owner, "created_at": now} for r in rows]
    stmt = insert_for(engine, passages_table).values(values)
    stmt = stmt.on_conflict_do_nothing(index_elements=["session_id", "start", "part"])
    with engine.begin() as conn:
        conn.execute(stmt)
    return len(values)


def search(engine: Engine, question: str, *, session_id: str | None = None, owner: str | None = None) -> list[Passage]:
    """Every archived passage of the session (or owner) with its score against ``question``, best first."""
    t = passages_table.c
    query = select(t.id, t.session_id, t.start, t.end, t.turn_start, t.turn_end, t.text, t.terms)
    if session_id is not None:
        query = query.where(t.session_id == session_id)
    if owner is not None:
        query = query.where(t.owner == owner)
    with engine.connect() as conn:
        rows = conn.execute(query.order_by(t.id.desc()).limit(MAX_RANKED)).all()
    scores = term_scores(terms(question), [r.terms.split() for r in rows])
    found = [
        Passage(r.id, r.session_id, r.start, r.end, r.turn_start, r.turn_end, r.text, score)
        for r, score in zip(rows, scores, strict=True)
    ]
    return sorted(found, key=lambda p: (-p.score, p.start, p.passage_id))


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
