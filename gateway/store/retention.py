"""Delete requests older than ``store.retention_days`` and the content no request references.

Content is shared between requests, so it is swept, not deleted with its request: after
the old request rows go, every message chain still reachable from a remaining request
(its original or assembled head, walked back to the root by one recursive query) is
kept, and so is every blob such a chain, tool list or answer points at; the rest goes.

Passages archived for recall (``memory_passages``) older than the cutoff go too: they are
verbatim copies of history the deleted requests carried, so recall keeps nothing longer
than the store does. Long-term facts (``memory_facts``, opt-in) are the user's to
``ventana memory forget``.

Tool usage profiles not updated since the cutoff go too: a profile is derived from users'
turns (a mean of their embeddings), and a tool nobody called for that long has either left the
catalogue or changed its definition (hence its key).

Runs in one transaction. In a gateway it runs in the writer's own loop, so it never
interleaves with that process's writes; with several gateway processes on one database
a write racing a prune can, rarely, reference content the prune just removed.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from sqlalchemy import CTE, CompoundSelect, Engine, delete, func, select, union

from gateway.store.models import Blob, MemoryPassage, MessageNode, Request, ToolProfile

SECONDS_PER_DAY = 86_400


@dataclass(frozen=True, slots=True)
class Pruned:
    requests: int
    nodes: int
    blobs: int
    profiles: int = 0
    passages: int = 0


def reachable_nodes() -> CTE:
    """Every message node some stored request's original or assembled list goes through."""
    heads = union(select(Request.original_head), select(Request.assembled_head))
    node = MessageNode.__table__
    start = select(node.c.hash, node.c.parent).where(node.c.hash.in_(heads))
    reach = start.cte("reach", recursive=True)
    step = select(node.c.hash, node.c.parent).join(reach, node.c.hash == reach.c.parent)
    return reach.union(step)


def prune(engine: Engine, *, retention_days: int, now: float | None = None) -> Pruned:
    """Delete requests created more than ``retention_days`` before ``now``, then orphaned content."""
    cutoff = (time.time() if now is None else now) - retention_days * SECONDS_PER_DAY
    with engine.begin() as conn:
        requests = conn.execute(delete(Request).where(Request.created_at < cutoff)).rowcount
        reach = reachable_nodes()
        before = conn.scalar(select(func.count()).select_from(MessageNode))
        conn.execute(delete(MessageNode).where(MessageNode.hash.not_in(select(reach.c.hash))))
        # rowcount is not reported for a DELETE with a WITH clause on every backend: count instead.
        nodes = (before or 0) - (conn.scalar(select(func.count()).select_from(MessageNode)) or 0)
        used: CompoundSelect[Any] = union(
            select(MessageNode.message),
            select(Request.original_tools).where(Request.original_tools.is_not(None)),
            select(Request.assembled_tools).where(Request.assembled_tools.is_not(None)),
            select(Request.answer).where(Request.answer.is_not(None)),
        )
        blobs = conn.execute(delete(Blob).where(Blob.hash.not_in(used))).rowcount
        profiles = conn.execute(delete(ToolProfile).where(ToolProfile.updated_at < cutoff)).rowcount
        passages = conn.execute(delete(MemoryPassage).where(MemoryPassage.created_at < cutoff)).rowcount
    return Pruned(requests=requests, nodes=nodes, blobs=blobs, profiles=profiles, passages=passages)
