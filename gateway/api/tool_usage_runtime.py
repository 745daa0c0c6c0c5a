"""Learn tool usage profiles at the edge: which tools the model called after which user turns.

Before assembly, a request gets the current profiles as a read-only snapshot (``Env.tool_profiles``),
which ``prune_tools`` mixes into its embedding scores. After the answer (complete or streamed),
when the model called tools right after a user turn, that turn's embedding is added to the
profiles of the tools it called. The embedding is the one the scorer computed for the request
(remembered by ``tool_scoring.embedding``); when it is not at hand, it is encoded in a worker
thread, never on the event loop.

Only requests the pass scored teach (an embedding scorer, ``usage_weight`` above 0, at least
``min_offered`` tools, the last message the user's): a call after a tool result says more about
the result than about what the user asked for. Profiles live in memory, one store per gateway
process, bounded (``usage_profiles.DEFAULT_MAX_PROFILES`` tools); they start empty after a restart.
A failure here is logged and never fails a request.
"""

from __future__ import annotations

import asyncio
import logging
from collections import OrderedDict
from collections.abc import Mapping
from typing import Any

from gateway.assembly.context import Context
from gateway.assembly.tool_scoring import EMBEDDING_SCORERS, query_text
from gateway.assembly.tool_scoring.usage_profiles import UsageProfiles, tool_keys
from gateway.config import Settings
from gateway.store.record import RequestRecord

log = logging.getLogger("ventana.tool_usage")
#: Requests in flight whose answer may still teach a profile (a request that never finishes is forgotten).
MAX_PENDING = 10_000
_NONE: Mapping[str, Any] = {}


class ToolUsageRuntime:
    def __init__(self, settings: Settings) -> None:
        policy = settings.policy.tools
        self.enabled = policy.enabled and policy.scorer in EMBEDDING_SCORERS and policy.usage_weight > 0
        self.min_offered = policy.min_offered
        self.profiles = UsageProfiles()
        self._pending: OrderedDict[str, tuple[str, dict[str, str]]] = OrderedDict()  # request id -> (turn, keys)
        self._tasks: set[asyncio.Future[None]] = set()

    def snapshot(self) -> Mapping[str, Any]:
        return self.profiles.snapshot() if self.enabled else _NONE

    def expect(self, request_id: str, ctx: Context) -> None:
        """Remember what this request's answer would teach: its turn's text and its tools' keys."""
        if not self.enabled or not ctx.tools or not ctx.messages or ctx.messages[-1].get("role") != "user":
            return
        keys = tool_keys(t for t in ctx.tools if isinstance(t.get("function"), Mapping))
        query = query_text(ctx.messages)
        if len(keys) < self.min_offered or not query.strip():
            return
        self._pending[request_id] = (query, keys)
        while len(self._pending) > MAX_PENDING:
            self._pending.popitem(last=False)

    def finish(self, record: RequestRecord) -> None:
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


def _called(tool_calls: Any) -> list[str]:
    names: list[str] = []
    for call in tool_calls or ():
        fn = call.get("function") if isinstance(call, Mapping) else None
        if isinstance(fn, Mapping) and fn.get("name"):
            names.append(str(fn["name"]))
    return list(dict.fromkeys(names))


def tool_usage_runtime(gw: Any) -> ToolUsageRuntime:
    """The gateway's one tool usage runtime, built on first use and kept in ``gw.background``."""
    found = gw.background.get("tool_usage")
    if found is None:
        found = gw.background["tool_usage"] = ToolUsageRuntime(gw.settings)
    return found  # type: ignore[no-any-return]
