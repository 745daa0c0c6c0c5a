"""The steps around assembly that do I/O, declared once in the order a request meets them.

``PASSES`` (``assembly/pipeline.py``) is the pure middle of a request; these are its edges.
``answer_chat`` loads the session's state, runs every edge's ``before`` in this order, assembles,
saves the state, then runs every ``after`` in the same order. Each edge is a long-lived object
built at start-up: the app's lifespan ``start``s every edge before the gateway serves and
``stop``s it after (its background work finished, what it holds released).

"After assembly" and "after the answer" are two steps: ``Edge.after`` runs before the request
is forwarded, on what was assembled; an ``AfterAnswer`` step (``Edges.after_answer``) runs once
the answer is known, as the request is recorded (``api/answer.finish``), on its record.

Order matters:

1. ``compaction``  before: adopt the checkpoints any process prepared for this session, so the
                   passes see them; after: publish the checkpoints this turn made and start
                   preparing the next summary ahead, once the threshold is near.
2. ``memory``      before: give ``recall_memory`` its candidates and facts (it reads the history
                   compaction may have summarised); after: archive what compaction replaced and
                   learn the user's facts, in the background.
3. ``tool_usage``  before: give the tool scorer the usage profiles learnt so far; after: remember
                   what this request's answer would teach; after the answer: learn it from the
                   tool calls.

The gateway's own tools (``find_tools``, ``recall_archive``) are not edges: they wrap the upstream call
(``edges/served_tools.py``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from gateway.assembly.context import Context, Decision
from gateway.config import Settings
from gateway.edges.compaction import CompactionRuntime
from gateway.edges.memory import MemoryRuntime
from gateway.edges.tool_usage import ToolUsageRuntime
from gateway.sessions.protocol import SessionStore
from gateway.store.record import RequestRecord
from gateway.store.tool_profiles import ToolProfileStore


@dataclass(frozen=True, slots=True)
class Turn:
    """What the edges know of one request beside its context."""

    request_id: str
    scoped: str  # the key the session's state lives under (its name inside the caller's scope)
    caller: str
    body: Mapping[str, Any]


class Edge(Protocol):
    """A step around assembly: may do I/O, must not raise for a request it can leave alone."""

    async def start(self) -> None:
        """Before the gateway serves its first request (load what was learnt, start syncing)."""
        ...

    async def before(self, ctx: Context, turn: Turn) -> Context:
        """``ctx`` with what this edge adds before assembly (the same object when nothing)."""
        ...

    async def after(
        self, turn: Turn, original: Context, assembled: Context, decisions: Sequence[Decision]
    ) -> list[Decision]:
        """Act on the assembled request (the session state is saved); decisions to record with it."""
        ...

    async def stop(self) -> None:
        """After the gateway stopped serving: finish the work in flight (a shutdown loses none of
        it), then release what the edge holds. The recorder and the session store are still open."""
        ...


class AfterAnswer(Protocol):
    """A step once the request is answered, as it is recorded: learns from the record, never raises.

    Runs in the loop callback that records the request, so it must not block; work worth a
    thread is started here and drained by its edge's ``stop``."""

    def answered(self, record: RequestRecord) -> None: ...


@dataclass(frozen=True, slots=True)
class Edges:
    """The gateway's edges, built once at start-up; ``ordered`` is the order every request runs them."""

    compaction: CompactionRuntime
    memory: MemoryRuntime
    tool_usage: ToolUsageRuntime

    @classmethod
    def build(
        cls,
        settings: Settings,
        sessions: SessionStore,
        *,
        stored: bool,
        tool_profiles: ToolProfileStore | None = None,
    ) -> Edges:
        """``stored``: the gateway records to its database (recall is on by default only then)."""
        return cls(
            compaction=CompactionRuntime(settings, sessions),
            memory=MemoryRuntime(settings, stored=stored, sessions=sessions),
            tool_usage=ToolUsageRuntime(settings, tool_profiles),
        )

    @property
    def ordered(self) -> tuple[Edge, ...]:
        return (self.compaction, self.memory, self.tool_usage)

    @property
    def after_answer(self) -> tuple[AfterAnswer, ...]:
        """The steps every answered request's record goes through, in this order."""
        return (self.tool_usage,)
