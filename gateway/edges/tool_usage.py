"""Learn tool usage profiles at the edge: which tools the model called after which user turns.

Before assembly, a request gets the current profiles as a read-only snapshot (``Env.tool_profiles``),
which ``prune_tools`` mixes into its embedding scores. After the answer (complete or streamed),
when the model called tools right after a user turn, that turn's embedding is added to the
profiles of the tools it called. The embedding is the one the scorer computed for the request
(remembered by ``tool_scoring.embedding``); when it is not at hand, it is encoded in a worker
thread, never on the event loop.

Only requests the pass scored teach (an embedding scorer, ``usage_weight`` above 0, at least
``min_offered`` tools, the last message the user's): a call after a tool result says more about
the result than about what the user asked for. Profiles live in memory, bounded
(``usage_profiles.DEFAULT_MAX_PROFILES`` tools). With a profile store (a served gateway,
``usage_persist``), they are loaded at start-up and, every ``usage_sync_s`` and at shutdown,
this worker's new observations are merged into the database and the rows other workers changed
are read back: a restart forgets nothing that was synced, and N workers learn from all the
traffic instead of 1/N of it each. A failure here is logged and never fails a request; a merge
that fails keeps its observations for the next attempt.
"""

from __future__ import annotations

import asyncio
import logging
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from gateway.assembly.context import Context, Decision
from gateway.assembly.tool_scoring import EMBEDDING_SCORERS, query_text
from gateway.assembly.tool_scoring.usage_profiles import UsageProfiles, tool_keys
from gateway.config import Settings
from gateway.store.record import RequestRecord

if TYPE_CHECKING:
    from gateway.edges.edges import Turn
    from gateway.store.tool_profiles import ToolProfileStore

log = logging.getLogger("ventana.tool_usage")
#: Requests in flight whose answer may still teach a profile (a request that never finishes is forgotten).
MAX_PENDING = 10_000
#: Rows read back are those updated since the last read, less this much for clocks that disagree.
CLOCK_SLACK_S = 5.0
_NONE: Mapping[str, Any] = {}  # not a cache: the empty snapshot, never written


def learns(settings: Settings) -> bool:
    """Whether this configuration scores with usage profiles, hence learns them."""
    policy = settings.policy.tools
    return policy.enabled and policy.scorer in EMBEDDING_SCORERS and policy.usage_weight > 0


class ToolUsageRuntime:
    def __init__(self, settings: Settings, store: ToolProfileStore | None = None) -> None:
        policy = settings.policy.tools
        self.enabled = learns(settings)
        self.min_offered = policy.min_offered
        self.sync_s = policy.usage_sync_s
        self.store = store if self.enabled else None
        self.profiles = UsageProfiles(track_delta=self.store is not None)
        self._pending: OrderedDict[str, tuple[str, dict[str, str]]] = OrderedDict()  # request id -> (turn, keys)
        self._tasks: set[asyncio.Future[None]] = set()
        self._syncer: asyncio.Task[None] | None = None
        self._read_since: float | None = None  # None: nothing read yet, the next read takes every row

    async def before(self, ctx: Context, turn: Turn) -> Context:
        """The context whose scorer sees the usage profiles learnt so far (the edge's ``before``)."""
        profiles = self.snapshot()
        return ctx.replace(env=replace(ctx.env, tool_profiles=profiles)) if profiles else ctx

    async def after(
        self, turn: Turn, original: Context, assembled: Context, decisions: Sequence[Decision]
    ) -> list[Decision]:
        """Remember what this request's answer would teach (learnt in ``answered``)."""
        self.expect(turn.request_id, original)
        return []

    def snapshot(self) -> Mapping[str, Any]:
        return self.profiles.snapshot() if self.enabled else _NONE

    def expect(self, request_id: str, ctx: Context) -> None:
        """Remember what this request's answer would teach: its turn's text and its tools' keys."""
        if not self.enabled or not ctx.tools or not ctx.messages or ctx.messages[-1].get("role") != "user":
            return
        keys = tool_keys((t for t in ctx.tools if isinstance(t.get("function"), Mapping)), ctx.env.caller)
        query = query_text(ctx.messages)
        if len(keys) < self.min_offered or not query.strip():
            return
        self._pending[request_id] = (query, keys)
        while len(self._pending) > MAX_PENDING:
            self._pending.popitem(last=False)

    def answered(self, record: RequestRecord) -> None:
        """Called once per request as it is recorded: learn from a successful answer's tool calls."""
        pending = self._pending.pop(record.request_id, None)
        if pending is None or record.status != 200 or not record.tool_calls:
            return
        query, keys = pending
        called = [keys[n] for n in _called(record.tool_calls) if n in keys]
        if not called:
            return
        from gateway.assembly.tool_scoring.embedding import remembered_query_vector

        vector = remembered_query_vector(query)
        if vector is not None:
            self.profiles.observe(called, vector)
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:  # not on a loop (a worker thread, a script): encode here
            self._learn(query, called)
            return
        task = loop.create_task(asyncio.to_thread(self._learn, query, called))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def _learn(self, query: str, called: list[str]) -> None:
        import numpy as np  # only with an embedding scorer, which imports it anyway

        from gateway.assembly.tool_scoring.embedding import query_vector

        try:
            self.profiles.observe(called, np.asarray(query_vector(query)))
        except Exception:
            log.exception("learning a tool usage profile failed")

    async def drain(self) -> None:
        """Wait for the profile updates in flight (tests, benchmarks)."""
        while self._tasks:
            await asyncio.gather(*list(self._tasks), return_exceptions=True)

    async def start(self) -> None:
        """Load the stored profiles and start syncing (a gateway's start-up; no store: nothing to do)."""
        if self.store is None:
            return
        await self.sync()
        self._syncer = asyncio.get_running_loop().create_task(self._sync_forever())

    async def stop(self) -> None:
        """Stop syncing and merge what is left, so a clean shutdown loses no observation."""
        if self._syncer is not None:
            self._syncer.cancel()
            await asyncio.gather(self._syncer, return_exceptions=True)
            self._syncer = None
        await self.drain()
        if self.store is not None:
            await self.sync()
            self.store.close()

    async def _sync_forever(self) -> None:
        while True:
            await asyncio.sleep(self.sync_s)
            await self.sync()

    async def sync(self) -> bool:
        """Merge this worker's new observations and read back what others merged; False on a failure."""
        if self.store is None:
            return True
        try:
            await asyncio.to_thread(self._sync, self.store)
        except Exception:
            log.exception("syncing tool usage profiles with the store failed; retrying in %.0f s", self.sync_s)
            return False
        return True

    def _sync(self, store: ToolProfileStore) -> None:
        delta = self.profiles.take_delta()
        try:
            merged, unmerged = store.merge(delta, self.profiles.max_examples) if delta else ([], {})
        except BaseException:
            self.profiles.return_delta(delta)
            raise
        if unmerged:
            self.profiles.return_delta(unmerged)
        since = self._read_since
        read = store.load(since=None if since is None else since - CLOCK_SLACK_S, limit=self.profiles.max_profiles)
        self.profiles.apply_stored([*merged, *read])  # read after the merge: newer where they differ
        newest = max((p.updated_at for p in (*read, *merged)), default=since)
        self._read_since = newest


def _called(tool_calls: Any) -> list[str]:
    names: list[str] = []
    for call in tool_calls or ():
        fn = call.get("function") if isinstance(call, Mapping) else None
        if isinstance(fn, Mapping) and fn.get("name"):
            names.append(str(fn["name"]))
    return list(dict.fromkeys(names))
