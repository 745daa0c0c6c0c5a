"""Memory's I/O around the pure recall pass: look up before assembly, archive and learn after.

Before assembly (``before``): for this turn's question, the session's archived passages
are ranked (only once the session has compacted something, or across the owner's
sessions with ``scope: owner``), and on a session's first turn the owner's facts are
read; both go into the Context's annotations for ``recall_memory``. After assembly
(``after``): the ranges compaction replaced (its ``compacted`` and ``checkpoint_reused``
decisions) are archived verbatim and the new user message is read for facts, in a
background task, off the request path. The next turn of the same session waits for that
task before it searches, so a recall never misses what the previous turn archived.

Most turns have nothing to look up (a session that never compacted has no archived passage;
an agent loop asks nothing new for hundreds of rounds), so the edge decides that on the loop
from the session's state, without a thread hop or a scan of the history, and keeps each
session's last ranking for as long as its question and its archive are unchanged.

In ``mode: tool`` nothing is searched before assembly: ``before`` only says whether the session
(or owner) has an archive, and ``search`` answers the model's ``recall_archive`` calls
(``edges/recall_tool.py``) with the same ranking, scoped the same way.

With a shared session store (``session_state: database``; ``--workers N``) the wait spans
processes: before its archive task starts, a turn marks the session's state (``ARCHIVING_KEY``,
through the store's atomic ``update``) and the task clears the mark when done; a turn on another
worker or replica that finds the mark waits for it to clear (at most ``ARCHIVE_WAIT_S``).

A database error degrades memory (logged, counted in no decision) and never fails a request.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import os
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from functools import partial
from typing import TYPE_CHECKING, Any, NamedTuple

from sqlalchemy import Engine
from sqlalchemy.exc import SQLAlchemyError

from gateway.assembly.context import Checkpoint, Context, Decision, Message, SessionState
from gateway.assembly.memory_blocks import (
    ARCHIVED_KEY,
    CANDIDATES_KEY,
    FACTS_KEY,
    STATE_KEY,
    Fact,
    Passage,
    asks_now,
)
from gateway.assembly.message_text import text_of
from gateway.assembly.verify_assembly import is_gateway_block, last_client_user
from gateway.config import Settings
from gateway.memory.archive import archive, archived_count, embed_missing, passages_of, search
from gateway.memory.extract_facts import extract_facts
from gateway.memory.llm_facts import LLMFactExtractor
from gateway.memory.profile import ANONYMOUS, owner_of, recall_facts, remember
from gateway.sessions.protocol import SessionStore
from gateway.store.engine import make_engine
from gateway.summarize.transcript import render_transcript
from gateway.upstream.router import UpstreamRouter

if TYPE_CHECKING:
    from gateway.edges.edges import Turn

log = logging.getLogger("ventana.memory")
#: Ranked candidates handed to the pass per max_passages it may place.
CANDIDATES_PER_PASSAGE = 4
#: The newest turns before the question (those not archived) that a passage must beat: one that
#: scores no higher only resembles what the model still sees.
TAIL_TURNS = 3
_ARCHIVING = ("compacted", "checkpoint_reused")
MAX_TRACKED_SESSIONS = 50_000
#: How long a session's ranking is reused while its question and archive stay the same. Bounded
#: because rows can leave the archive from outside this process (``ventana memory forget``,
#: retention in another replica): such a removal reaches recall within this many seconds.
RANKING_MAX_AGE_S = 30.0
#: ``SessionState.extra`` key marking an archive task in flight (its value names the task).
ARCHIVING_KEY = "memory_archiving"
#: How long a turn waits for an archive another process is writing (a crashed writer's mark expires). An
#: archive task embeds up to ``embed_per_archive`` passages: ~6 s at 64 on the development machine, ~15 s on
#: one 2.5x slower; a replica that stopped waiting sooner would rank before the vectors land.
ARCHIVE_WAIT_S = 30.0
_POLL_S = 0.05


def _marked(token: str | None, state: SessionState) -> SessionState:
    """``state`` with the archive mark set to ``token`` (None: cleared, if it is still this task's)."""
    extra = dict(state.extra)
    if token is not None:
        extra[ARCHIVING_KEY] = token
    elif ARCHIVING_KEY in extra:
        del extra[ARCHIVING_KEY]
    return replace(state, extra=extra)


def user_texts(messages: Sequence[Message]) -> list[str]:
    return [text_of(m.get("content")) for m in messages if m.get("role") == "user" and not is_gateway_block(m)]


def last_user_text(messages: Sequence[Message]) -> str:
    """The newest user message's text ("" if none): the question recall ranks against."""
    newest = last_client_user(messages)
    return "" if newest < 0 else text_of(messages[newest].get("content"))


def tail_turns(messages: Sequence[Message], archived_end: int, turns: int = TAIL_TURNS) -> list[str]:
    """The newest ``turns`` turns before the question and after what was archived, rendered as passages are."""
    question = last_client_user(messages)
    if question <= archived_end:
        return []
    starts = [
        i
        for i in range(archived_end, question)
        if messages[i].get("role") == "user" and not is_gateway_block(messages[i])
    ][-turns:]
    bounds = [*starts, question]
    texts = [
        render_transcript([m for m in messages[a:b] if not is_gateway_block(m)]) for a, b in itertools.pairwise(bounds)
    ]
    return [t for t in texts if t.strip()]


def said_before(candidates: Sequence[Passage], session_id: str, length: int) -> tuple[Passage, ...]:
    """The candidates from before this request's end: a passage of this session archived from messages at or
    past ``length`` (the history the client sends) was said after the point a rewind went back to (an
    edited earlier message, Claude Code's ``/rewind``): given back as "earlier in this conversation" it
    would tell the model that an abandoned branch happened. A client resends its whole history, so every
    range the gateway archived from it ends within it; other sessions' passages (``scope: owner``) stand."""
    kept = tuple(p for p in candidates if p.session_id != session_id or p.end <= length)
    return kept if len(kept) < len(candidates) else tuple(candidates)


class _RecallKey(NamedTuple):
    """What a session's ranking depends on: the question, and what the session has archived
    (its checkpoints, which a replica's compaction also adds to, and the end archived here)."""

    question: str
    checkpoints: tuple[Checkpoint, ...]
    archived_end: int


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


def _unmarked(token: str, state: SessionState) -> SessionState:
    """``state`` without the archive mark, if the mark is still ``token`` (a later task's stays)."""
    return _marked(None, state) if state.extra.get(ARCHIVING_KEY) == token else state


class MemoryRuntime:
    def __init__(self, settings: Settings, *, stored: bool = True, sessions: SessionStore | None = None) -> None:
        """``stored``: the gateway records to its database. Recall is on by default only then: without
        a store the archive would be the only copy of what users said (switch it on explicitly).
        ``sessions``: a shared store carries the archive marks across processes."""
        self._shared = sessions if sessions is not None and sessions.blocking else None
        self._marking: dict[str, asyncio.Future[None]] = {}  # archive mark -> stored (``after`` waits for it)
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
        # session -> the last ranking of its archive and what it was ranked for (bounded likewise)
        self._ranked: OrderedDict[str, tuple[_RecallKey, tuple[Passage, ...], float]] = OrderedDict()

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
        token = self.learn(original, decisions, turn.body, turn.caller)
        marked = self._marking.pop(token, None) if token is not None else None
        if marked is not None:  # the mark is stored before the answer: the next turn, anywhere, sees it
            await asyncio.shield(marked)
        return []

    async def annotate(self, ctx: Context, body: Mapping[str, Any], caller: str) -> Context:
        """``ctx`` annotated with the candidates and facts ``recall_memory`` may place."""
        if not self.policy.enabled:
            return ctx
        session_id = ctx.session.session_id
        owner = owner_of(body, caller)
        await self._written(session_id, owner)
        if ARCHIVING_KEY in ctx.session.extra:
            await self._archived_elsewhere(session_id)
        if self.policy.recall and self.policy.mode == "tool":  # the pass offers the tool once there is an archive
            ctx = ctx.annotate(**{ARCHIVED_KEY: await self._has_archive(session_id, owner)})
        question, by_owner = self._question(ctx, owner)
        facts = self._wants_facts(ctx, owner)
        key = _RecallKey(question, ctx.session.checkpoints, self._archived.get(session_id, 0))
        known = self._ranked.get(session_id) if question and not by_owner else None
        reuse = known is not None and known[0] == key and time.monotonic() - known[2] < RANKING_MAX_AGE_S
        if not facts and (not question or reuse):  # nothing to look up: no thread hop, no query
            if reuse and known is not None:
                return ctx.annotate(**{CANDIDATES_KEY: said_before(known[1], session_id, len(ctx.messages))})
            return ctx
        tail = tuple(tail_turns(ctx.messages, self._seen_end(ctx))) if question and not reuse else ()
        values: dict[str, Any] = {}
        try:
            values.update(
                await asyncio.to_thread(
                    self._lookup, session_id, owner, question if not reuse else "", by_owner, facts, tail
                )
            )
        except SQLAlchemyError:
            log.exception("memory lookup failed for session %s; this turn goes without memory", session_id)
        if reuse and known is not None:
            values[CANDIDATES_KEY] = known[1]
        elif CANDIDATES_KEY in values and not by_owner:
            self._remember_ranking(session_id, key, values[CANDIDATES_KEY])
        if CANDIDATES_KEY in values:
            values[CANDIDATES_KEY] = said_before(values[CANDIDATES_KEY], session_id, len(ctx.messages))
        return ctx.annotate(**values) if values else ctx

    async def _written(self, session_id: str, owner: str | None) -> None:
        """Wait for what this session archived, or this owner stated, on an earlier turn."""
        waits = [t for t in (self._pending.get(session_id), self._pending.get(f"owner:{owner}")) if t]
        if waits:
            await asyncio.gather(*waits, return_exceptions=True)

    async def _archived_elsewhere(self, session_id: str) -> None:
        """Wait (bounded) while the session's state says an archive task, maybe in another process, runs."""
        if self._shared is None:
            return
        deadline = time.monotonic() + ARCHIVE_WAIT_S
        while time.monotonic() < deadline:
            if ARCHIVING_KEY not in (await self._shared.load(session_id)).extra:
                return
            await asyncio.sleep(_POLL_S)

    def _by_owner(self, owner: str | None) -> bool:
        """Whether recall ranks the owner's passages (``scope: owner``) rather than the session's."""
        return self.policy.scope == "owner" and owner is not None

    async def _has_archive(self, session_id: str, owner: str | None) -> bool:
        """Tool mode: whether this session (or, under ``scope: owner``, the owner) archived anything.

        The session's own archive is known on the loop (or from its checkpoints, which the pass sees)."""
        if session_id in self._archived:
            return True
        if not self._by_owner(owner):
            return False
        try:
            return await asyncio.to_thread(archived_count, self.engine, owner=owner) > 0
        except SQLAlchemyError:
            log.exception("memory lookup failed for owner of session %s; recall is not offered", session_id)
            return False

    def _question(self, ctx: Context, owner: str | None) -> tuple[str, bool]:
        """This turn's question when the session has archived passages to rank against it (else ""),
        and whether the ranking spans the owner's sessions."""
        policy, session = self.policy, ctx.session
        by_owner = self._by_owner(owner)
        archived = session.checkpoints or session.session_id in self._archived or by_owner
        if not (policy.recall and policy.mode == "inline" and archived):
            return "", by_owner
        newest = last_client_user(ctx.messages)
        if not asks_now(ctx.messages, newest):
            return "", by_owner  # an agent round after the question: the pass resends the question's frozen block
        return text_of(ctx.messages[newest].get("content")), by_owner

    def _wants_facts(self, ctx: Context, owner: str | None) -> bool:
        session = ctx.session
        return bool(self.policy.long_term and owner and session.turn == 0 and STATE_KEY not in session.extra)

    def _remember_ranking(self, session_id: str, key: _RecallKey, found: tuple[Passage, ...]) -> None:
        self._ranked[session_id] = (key, found, time.monotonic())
        self._ranked.move_to_end(session_id)
        while len(self._ranked) > MAX_TRACKED_SESSIONS:
            self._ranked.popitem(last=False)

    def _seen_end(self, ctx: Context) -> int:
        """Where the history the model still sees verbatim starts: after every archived or summarised range."""
        ends = [c.end for c in ctx.session.checkpoints]
        return max([self._archived.get(ctx.session.session_id, 0), *ends])

    def _lookup(
        self, session_id: str, owner: str | None, question: str, by_owner: bool, facts: bool, tail: Sequence[str] = ()
    ) -> dict[str, Any]:
        """Runs in a worker thread: rank the archive against ``question`` (if any), read the facts (if asked)."""
        values: dict[str, Any] = {}
        if question:
            values[CANDIDATES_KEY] = tuple(self._rank(question, session_id, owner if by_owner else None, tail))
        if facts and owner:
            values[FACTS_KEY] = tuple(recall_facts(self.engine, owner, self.policy.max_facts))
        return values

    def _rank(self, question: str, session_id: str, owner: str | None, tail: Sequence[str] = ()) -> list[Passage]:
        """The best candidates for ``question`` and the turns next to them (the owner's passages when
        ``owner`` is given, else the session's); none that only resembles the ``tail``."""
        found = search(self.engine, question, session_id=None if owner else session_id, owner=owner, tail=tail)
        top = [p for p in found[: max(1, self.policy.max_passages) * CANDIDATES_PER_PASSAGE] if p.score > 0]
        ids = {p.passage_id for p in top}
        edges = {(p.session_id, x) for p in top[: max(1, self.policy.max_passages) * 2] for x in (p.start, p.end)}
        near = [
            p
            for p in found
            if p.passage_id not in ids
            and p.score > 0
            and ((p.session_id, p.start) in edges or (p.session_id, p.end) in edges)
        ]
        return [*top, *near]

    async def search(self, question: str, session_id: str, owner: str | None) -> list[Passage]:
        """The ranked candidates for a ``recall_archive`` call of this session (scoped as inline recall is).

        Waits for the session's archive task first; a database error gives no passage, never a failure."""
        await self._written(session_id, owner)
        await self._archived_elsewhere(session_id)
        try:
            return await asyncio.to_thread(self._rank, question, session_id, owner if self._by_owner(owner) else None)
        except SQLAlchemyError:
            log.exception("recall search failed for session %s; the model gets no passage", session_id)
            return []

    def learn(
        self, original: Context, decisions: Sequence[Decision], body: Mapping[str, Any], caller: str
    ) -> str | None:
        """Archive what compaction replaced and learn the user's new facts, in a background task.

        Returns the task's archive mark when it archives ranges (None otherwise)."""
        if not self.policy.enabled:
            return None
        session_id = original.session.session_id
        owner = owner_of(body, caller)
        prior = self._archived.get(session_id, 0)
        ranges = [(s, e) for s, e in compacted_ranges(decisions) if e > prior]
        learn = self._new_statements(original, owner)
        if not ranges and not learn:
            return None
        if ranges:
            self._archived[session_id] = max(e for _, e in ranges)
            self._archived.move_to_end(session_id)
            while len(self._archived) > MAX_TRACKED_SESSIONS:
                self._archived.popitem(last=False)
        token = os.urandom(8).hex() if ranges else None
        loop = asyncio.get_running_loop()
        marked: asyncio.Future[None] | None = None
        if token is not None and self._shared is not None:
            marked = self._marking[token] = loop.create_future()
        task = loop.create_task(self._archive(original, ranges, learn, owner or ANONYMOUS, token, marked, prior))
        for key in (session_id, *([f"owner:{owner}"] if owner else [])):
            self._pending[key] = task
            task.add_done_callback(partial(self._forget_task, key))
        return token

    async def _archive(
        self,
        original: Context,
        ranges: list[tuple[int, int]],
        learn: list[str],
        owner: str,
        token: str | None,
        marked: asyncio.Future[None] | None,
        prior: int = 0,
    ) -> None:
        """Mark (shared store), write in a thread, unmark; what the loop tracks (``_archived``, the mark)
        is changed here, on the loop, never from the thread."""
        session_id = original.session.session_id
        if token is not None and marked is not None and self._shared is not None:
            try:
                await self._shared.update(session_id, partial(_marked, token))
            except Exception:  # memory degrades, never fails a request: other replicas then do not wait
                log.exception("could not mark the archive of session %s", session_id)
            finally:
                if not marked.done():
                    marked.set_result(None)
        if not await asyncio.to_thread(self._write, original, ranges, learn, owner, prior):
            self._archived.pop(session_id, None)  # try again on the next compacted turn
        if token is not None and self._shared is not None:
            try:
                await self._shared.update(session_id, partial(_unmarked, token))
            except Exception:  # the mark then expires for waiters after ARCHIVE_WAIT_S
                log.exception("could not clear the archive mark of session %s", session_id)

    def _new_statements(self, original: Context, owner: str | None) -> list[str]:
        """The user messages to read for facts: all on a session's first turn, else the newest."""
        if not (self.policy.long_term and owner):
            return []  # scanning the history would be wasted: nothing is learned
        if original.session.turn == 0:
            return user_texts(original.messages)
        newest = last_client_user(original.messages)
        return [] if newest < 0 else [text_of(original.messages[newest].get("content"))]

    def _forget_task(self, key: str, task: asyncio.Future[None]) -> None:
        if self._pending.get(key) is task:
            del self._pending[key]

    def _write(
        self, original: Context, ranges: list[tuple[int, int]], learn: list[str], owner: str, prior: int = 0
    ) -> bool:
        """Runs in a worker thread; False when the database failed (touches nothing the loop changes).

        Archives ``ranges`` from the turns from ``prior`` on (earlier ones are in already) and stores the
        facts learned. An archive that added passages then gives vectors to at most ``embed_per_archive``
        of the session's passages without one, newest first (``archive.embed_missing``): the next turn
        waits for this task, so a first compaction of 100K tokens would otherwise hold it ~35 s."""
        session_id = original.session.session_id
        count = original.env.counter.text
        try:
            new = 0
            for start, end in ranges:
                rows = passages_of(original.messages, max(start, prior), end, self.policy.passage_tokens, count)
                new += archive(self.engine, session_id, owner, rows)
            if new and self.policy.embeddings:  # an archive that added passages: the same turn on any replica
                embed_missing(self.engine, session_id, self.policy.embed_per_archive)
            facts = self.extract(learn) if learn else []
            if facts and owner != ANONYMOUS:
                remember(self.engine, owner, session_id, facts)
        except SQLAlchemyError:
            log.exception("memory write failed for session %s", session_id)
            return False
        return True

    async def start(self) -> None:
        """Nothing to load: the archive and the facts are read per request."""

    async def stop(self) -> None:
        """Let the archive and learn tasks in flight finish (a shutdown loses none), then release the engine."""
        await self.drain()
        self.close()

    async def drain(self) -> None:
        """Wait for every archive/learn task in flight (shutdown, tests, benchmarks)."""
        while self._pending:
            await asyncio.gather(*list(self._pending.values()), return_exceptions=True)

    def close(self) -> None:
        if self._engine is not None:
            self._engine.dispose()
        if isinstance(self.extract, LLMFactExtractor):
            self.extract.close()
