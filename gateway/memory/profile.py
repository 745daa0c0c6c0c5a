"""Long-term memory: the facts each user stated, one per (owner, slot), in ``memory_facts``.

The owner is ``caller:<short hash of the caller's key>``, and
``caller:<hash>/user:<the request's user field>`` when the client sends one: ``user`` is the
client's to choose, so it only names a user inside its caller's scope (key B sending
``user: "alice"`` reaches a different owner than key A's alice). Anonymous callers without
``user`` get no long-term memory (every keyless client would share it). A fact on a slot already stored replaces it
(contradiction: the newer statement wins); the same text again only touches nothing.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, cast

from sqlalchemy import ColumnElement, Engine, Table, delete, select, update

from gateway.assembly.memory_blocks import Fact
from gateway.store.models import MemoryFact, MemoryPassage

facts_table = cast(Table, MemoryFact.__table__)
ANONYMOUS = "anonymous"
#: An owner name starting with this matches that user under every caller (``ventana memory --user``).
ANY_CALLER = "caller:*/"
_passages = cast(Table, MemoryPassage.__table__)


def owner_of(body: Mapping[str, Any], caller: str) -> str | None:
    """Whose memory this request reads and writes; None for an anonymous caller without ``user``."""
    caller = caller or ANONYMOUS
    user = body.get("user")
    if isinstance(user, str) and user.strip():
        return f"caller:{caller}/user:{user.strip()[:150]}"
    return None if caller == ANONYMOUS else "caller:" + caller


def owner_matches(column: ColumnElement[str], owner: str) -> ColumnElement[bool]:
    """The SQL condition for ``owner``: exact, or a user under any caller when it starts with ``ANY_CALLER``."""
    if not owner.startswith(ANY_CALLER):
        return column == owner
    rest = owner[len(ANY_CALLER) :].replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return column.like("caller:%/" + rest, escape="\\")


@dataclass(frozen=True, slots=True)
class StoredFact:
    id: int
    owner: str
    slot: str
    text: str
    source_session: str
    updated_at: float

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "owner": self.owner,
            "slot": self.slot,
            "text": self.text,
            "source_session": self.source_session,
            "updated_at": self.updated_at,
        }


def remember(engine: Engine, owner: str, session_id: str, facts: Sequence[Fact]) -> tuple[int, int]:
    """Upsert ``facts`` for ``owner``; return (added, updated). Unchanged facts are left alone."""
    added = updated = 0
    now = time.time()
    t = facts_table.c
    with engine.begin() as conn:
        stored = {r.slot: r.text for r in conn.execute(select(t.slot, t.text).where(t.owner == owner))}
        for fact in facts:
            if fact.slot not in stored:
                conn.execute(
                    facts_table.insert().values(
                        owner=owner,
                        slot=fact.slot,
                        text=fact.text,
                        source_session=session_id,
                        created_at=now,
                        updated_at=now,
                    )
                )
                added += 1
            elif stored[fact.slot] != fact.text:
                conn.execute(
                    update(facts_table)
                    .where(t.owner == owner, t.slot == fact.slot)
                    .values(text=fact.text, source_session=session_id, updated_at=now)
                )
                updated += 1
            stored[fact.slot] = fact.text
    return added, updated


def recall_facts(engine: Engine, owner: str, limit: int = 50) -> list[Fact]:
    """The owner's facts, most recently stated first."""
    t = facts_table.c
    query = select(t.slot, t.text).where(t.owner == owner).order_by(t.updated_at.desc(), t.id.desc()).limit(limit)
    with engine.connect() as conn:
        return [Fact(r.slot, r.text) for r in conn.execute(query)]


def list_facts(engine: Engine, owner: str | None = None) -> list[StoredFact]:
    """Stored facts (of one owner, or all), by owner then newest first."""
    t = facts_table.c
    query = select(t.id, t.owner, t.slot, t.text, t.source_session, t.updated_at)
    if owner is not None:
        query = query.where(owner_matches(t.owner, owner))
    with engine.connect() as conn:
        rows = conn.execute(query.order_by(t.owner, t.updated_at.desc(), t.id.desc())).all()
    return [StoredFact(r.id, r.owner, r.slot, r.text, r.source_session, r.updated_at) for r in rows]


def forget(engine: Engine, owner: str) -> tuple[int, int]:
    """Delete every fact and archived passage of ``owner``; return (facts, passages) deleted."""
    with engine.begin() as conn:
        facts = conn.execute(delete(facts_table).where(owner_matches(facts_table.c.owner, owner))).rowcount
        passages = conn.execute(delete(_passages).where(owner_matches(_passages.c.owner, owner))).rowcount
    return int(facts or 0), int(passages or 0)
