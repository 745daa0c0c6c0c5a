"""Memory's I/O around the pure recall pass: look up before assembly, archive and learn after.

Before assembly (``before``): for this turn's question, the session's archived passages
are ranked (only once the session has compacted something, or across the owner's
sessions with ``scope: owner``), and on a session's first turn the owner's facts are
read; both go into the Context's annotations for ``recall_memory``. After assembly
(``after``): the ranges compaction replaced (its ``compacted`` and ``checkpoint_reused``
decisions) are archived verbatim and the new user message is read for facts, in a
background task, off the request path. The next turn of the same session waits for that
task before it searches, so a recall never misses what the previous turn archived.

In ``mode: tool`` nothing is searched before assembly: ``before`` only says whether the session
(or owner) has an archive, and ``search`` answers the model's ``recall_archive`` calls
(``api/recall_tool.py``) with the same ranking, scoped the same way.

A database error degrades memory (logged, counted in no decision) and never fails a request.
"""

from __future__ import annotations

import asyncio
import logging
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from functools import partial
from typing import TYPE_CHECKING, Any

from sqlalchemy import Engine
from sqlalchemy.exc import SQLAlchemyError

from gateway.assembly.context import Context, Decision, Message
from gateway.assembly.memory_blocks import ARCHIVED_KEY, CANDIDATES_KEY, FACTS_KEY, STATE_KEY, Fact, Passage
from gateway.assembly.message_text import text_of
from gateway.assembly.verify_assembly import is_gateway_block
from gateway.config import Settings
from gateway.memory.archive import archive, archived_count, passages_of, search
from gateway.memory.extract_facts import extract_facts
from gateway.memory.llm_facts import LLMFactExtractor
from gateway.memory.profile import ANONYMOUS, owner_of, recall_facts, remember
from gateway.store.engine import make_engine
from gateway.store.record import RequestRecord
from gateway.upstream.router import UpstreamRouter

if TYPE_CHECKING:
    from gateway.api.edges import Turn

log = logging.getLogger("ventana.memory")
#: Ranked candidates handed to the pass per max_passages it may place.
CANDIDATES_PER_PASSAGE = 4
_ARCHIVING = ("compacted", "checkpoint_reused")
MAX_TRACKED_SESSIONS = 50_000


def user_texts(messages: Sequence[Message]) -> list[str]:
    return [text_of(m.get("content")) for m in messages if m.get("role") == "user" and not is_gateway_block(m)]


def compacted_ranges(decisions: Sequence[Decision]) -> list[tuple[int, int]]:
    """The (start, end) message ranges compaction replaced this turn."""
    return [
        (int(d.detail["start"]), int(d.detail["end"]))
        for d in decisions
        if d.pass_name == "compact_history" and d.action in _ARCHIVING and "start" in d.detail
    ]


def _fact_extractor(settings: Settings) -> Callable[[Sequence[str]], list[Fact]]:
    """The rules, or the summariser model over them when ``extract_with: summarizer`` names one."""
    name = settings.policy.compaction.summarizer_model
    model = settings.model(name) if name else None
    if settings.policy.memory.extract_with != "summarizer" or model is None:
        return extract_facts
    timeout = settings.policy.compaction.summarizer_timeout_s
    return LLMFactExtractor(model=model, api_key=UpstreamRouter.provider_key(model), timeout_s=timeout)


class MemoryRuntime:
    def __init__(self, settings: Settings, *, stored: bool = True) -> None:
        """``stored``: the gateway records to its database. Recall is on by default only then: without
        a store the archive would be the only copy of what users said (switch it on explicitly)."""
        self.policy = settings.policy.memory
        if not stored and "enabled" not in self.policy.model_fields_set:
            self.policy = self.policy.model_copy(update={"enabled": False})
        self.extract: Callable[[Sequence[str]], list[Fact]] = _fact_extractor(settings)
        self._url = settings.database_url
        self._engine: Engine | None = None
        self._pending: dict[str, asyncio.Future[None]] = {}  # by session id and by owner
        # session -> end of the furthest range archived (bounded: a forgotten session only re-offers
        # rows the unique key then skips)
        self._archived: OrderedDict[str, int] = OrderedDict()

    @property
    def engine(self) -> Engine:
        if self._engine is None:
            self._engine = make_engine(self._url)
        return self._engine

    async def before(self, ctx: Context, turn: Turn) -> Context:
        """The edge's ``before``: the recall candidates and facts of this turn."""
        return await self.annotate(ctx, turn.body, turn.caller)

    async def after(
        self, turn: Turn, original: Context, assembled: Context, decisions: Sequence[Decision]
    ) -> list[Decision]:
        """The edge's ``after``: archive and learn in the background; nothing to record now."""
        self.learn(original, decisions, turn.body, turn.caller)
        return []

    def finish(self, record: RequestRecord) -> None:
        """Nothing to learn from the answer."""

    async def annotate(self, ctx: Context, body: Mapping[str, Any], caller: str) -> Context:
        """``ctx`` annotated with the candidates and facts ``recall_memory`` may place."""
        if not self.policy.enabled:
            return ctx
        session_id = ctx.session.session_id
        owner = owner_of(dict(body), caller)
        # What this session archived, or this owner stated, on an earlier turn is written first.
        waits = [t for t in (self._pending.get(session_id), self._pending.get(f"owner:{owner}")) if t]
        if waits:
            await asyncio.gather(*waits, return_exceptions=True)
        values: dict[str, Any] = {}
        try:
            values.update(await asyncio.to_thread(self._lookup, ctx, owner))
        except SQLAlchemyError:
            log.exception("memory lookup failed for session %s; this turn goes without memory", session_id)
        return ctx.annotate(**values) if values else ctx

    def _lookup(self, ctx: Context, owner: str | None) -> dict[str, Any]:
        policy, session = self.policy, ctx.session
        values: dict[str, Any] = {}
        question = next(reversed(user_texts(ctx.messages)), "")
        by_owner = policy.scope == "owner" and owner is not None
        may_have = bool(session.checkpoints) or session.session_id in self._archived or by_owner
        if policy.recall and policy.mode == "inline" and question and may_have:
            values[CANDIDATES_KEY] = tuple(self._ranked(question, session.session_id, owner))
        elif policy.recall and policy.mode == "tool":  # the pass offers the tool once there is an archive
            archived = session.session_id in self._archived  # (or the session has checkpoints: the pass sees them)
            values[ARCHIVED_KEY] = archived or (by_owner and archived_count(self.engine, owner=owner) > 0)
        if policy.long_term and owner and session.turn == 0 and STATE_KEY not in session.extra:
            values[FACTS_KEY] = tuple(recall_facts(self.engine, owner, policy.max_facts))
        return values

    def _ranked(self, question: str, session_id: str, owner: str | None) -> list[Passage]:
        """The best candidates for ``question``: the session's passages, or the owner's under ``scope: owner``."""
        by_owner = self.policy.scope == "owner" and owner is not None
        found = search(
            self.engine, question, session_id=None if by_owner else session_id, owner=owner if by_owner else None
        )
        return found[: max(1, self.policy.max_passages) * CANDIDATES_PER_PASSAGE]

    async def search(self, question: str, session_id: str, owner: str | None) -> list[Passage]:
        """The ranked candidates for a ``recall_archive`` call of this session (scoped as inline recall is).

        Waits for the session's archive task first; a database error gives no passage, never a failure."""
        waits = [t for t in (self._pending.get(session_id), self._pending.get(f"owner:{owner}")) if t]
        if waits:
            await asyncio.gather(*waits, return_exceptions=True)
        try:
            return await asyncio.to_thread(self._ranked, question, session_id, owner)
        except SQLAlchemyError:
            log.exception("recall search failed for session %s; the model gets no passage", session_id)
            return []

    def learn(self, original: Context, decisions: Sequence[Decision], body: Mapping[str, Any], caller: str) -> None:
        """Archive what compaction replaced and learn the user's new facts, in a background task."""
        if not self.policy.enabled:
            return
        session_id = original.session.session_id
        owner = owner_of(dict(body), caller)
        ranges = [(s, e) for s, e in compacted_ranges(decisions) if e > self._archived.get(session_id, 0)]
        texts = user_texts(original.messages)
        learn = (texts if original.session.turn == 0 else texts[-1:]) if self.policy.long_term and owner else []
        if not ranges and not learn:
            return
        if ranges:
            self._archived[session_id] = max(e for _, e in ranges)
            self._archived.move_to_end(session_id)
            while len(self._archived) > MAX_TRACKED_SESSIONS:
                self._archived.popitem(last=False)
        task = asyncio.get_running_loop().create_task(
            asyncio.to_thread(self._write, original, ranges, learn, owner or ANONYMOUS)
        )
        for key in (session_id, *([f"owner:{owner}"] if owner else [])):
            self._pending[key] = task
            task.add_done_callback(partial(self._forget_task, key))

    def _forget_task(self, key: str, task: asyncio.Future[None]) -> None:
        if self._pending.get(key) is task:
            del self._pending[key]

    def _write(self, original: Context, ranges: list[tuple[int, int]], learn: list[str], owner: str) -> None:
        session_id = original.session.session_id
        count = original.env.counter.text
        try:
            for start, end in ranges:
                rows = passages_of(original.messages, start, end, self.policy.passage_tokens, count)
                archive(self.engine, session_id, owner, rows)
            facts = self.extract(learn) if learn else []
            if facts and owner != ANONYMOUS:
                remember(self.engine, owner, session_id, facts)
        except SQLAlchemyError:
            self._archived.pop(session_id, None)  # try again on the next compacted turn
            log.exception("memory write failed for session %s", session_id)

    async def drain(self) -> None:
        """Wait for every archive/learn task in flight (shutdown, tests, benchmarks)."""
        while self._pending:
            await asyncio.gather(*list(self._pending.values()), return_exceptions=True)

    def close(self) -> None:
        if self._engine is not None:
            self._engine.dispose()
        if isinstance(self.extract, LLMFactExtractor):
            self.extract.close()
