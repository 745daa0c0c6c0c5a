"""Compaction's moving parts in a running gateway: the LLM summariser and summaries prepared ahead.

The compaction passes are pure; what does I/O lives here. ``CompactionRuntime`` builds
each model's summariser once (``gateway.summarize.choice``: ``summarizer_model``, else the
session's own model when it has a provider key, else extractive; a turn given one assembles
in a worker thread, as it may call it), and prepares the
next checkpoint in the background once a session passes the lower watermark: a pure
plan (``plan_compaction``), the summariser in a thread, the checkpoint saved into the
session's append-only checkpoint claims. At most one preparation runs per session and
checkpoint across every process sharing the session store (``claim``), and the
summariser itself makes each distinct call once (``ClaimedSummarizer``).

Finished checkpoints are never written into the last-writer-wins session state from the
background: each turn ``adopt``s the ones its state lacks (waiting, bounded, for one still
being prepared), so a turn sees the same checkpoints whichever replica receives it.

A summariser that fails or times out in the background cannot fail a request (the
extractive summary is prepared instead, by ``summarize_range``), but it must not go
unseen either: the ``summarizer_failed`` decision is owed to the session's next request,
which records it beside its own decisions; so is what the summariser model billed for it (a
``summarizer``/``billed`` decision: the next request's billed usage includes it). Both are owed in
the session's state (``OWED_KEY``,
written with the store's atomic ``update``), so the next request sees it whichever worker or
replica receives it; the turn that reports it drops it from the state it saves.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping, Sequence
from dataclasses import replace
from functools import partial
from typing import TYPE_CHECKING, Any

from gateway.assembly.compaction_policy import for_window
from gateway.assembly.context import Checkpoint, Context, Decision, SessionState, Summarizer
from gateway.assembly.plan_compaction import CompactionPlan, adopt_checkpoints, plan_compaction, prepare
from gateway.config import ModelConfig, Settings
from gateway.sessions.checkpoints import (
    checkpoint_key,
    checkpoint_result,
    failed_result,
    publish_checkpoints,
    published_checkpoints,
)
from gateway.sessions.claimed_summary import ClaimedSummarizer
from gateway.sessions.protocol import SessionStore, store_call
from gateway.summarize.billing import summary_bill
from gateway.summarize.choice import shares_cache, summarizer_model
from gateway.summarize.llm import LLMSummarizer
from gateway.upstream.router import UpstreamRouter

if TYPE_CHECKING:
    from gateway.edges.edges import Turn

log = logging.getLogger("ventana.compaction")
WAIT_MARGIN_S = 5.0  # beyond the summariser's own timeout, for the winner to store its result

#: ``SessionState.extra`` key holding a background summariser failure owed to the session's next request.
OWED_KEY = "compaction_owed"
#: Reports held between a request's ``before`` and ``after``; past this many the oldest go.
MAX_OWED_REPORTS = 10_000
#: Decisions one session can owe its next request (a failure and a bill per preparation).
MAX_OWED_PER_SESSION = 8


def _owed_decision(data: Mapping[str, Any]) -> Decision:
    return Decision(
        str(data["pass"]),
        str(data["action"]),
        int(data.get("tokens_before", 0)),
        int(data.get("tokens_after", 0)),
        str(data.get("reason", "")),
        dict(data.get("detail") or {}),
    )


def _owed_list(value: Any) -> list[Mapping[str, Any]]:
    """What a session owes its next request: a list of decisions (one dict, as states saved before held)."""
    if isinstance(value, Mapping):
        return [value]
    return [v for v in value if isinstance(v, Mapping)] if isinstance(value, list) else []


def _owe(owed: Sequence[Mapping[str, Any]], state: SessionState) -> SessionState:
    held = [*_owed_list(state.extra.get(OWED_KEY)), *map(dict, owed)][-MAX_OWED_PER_SESSION:]
    return replace(state, extra={**state.extra, OWED_KEY: held})


class CompactionRuntime:
    def __init__(self, settings: Settings, sessions: SessionStore) -> None:
        self.policy = settings.policy.compaction
        self._settings = settings
        self._sessions = sessions
        # One summariser per summarising model (several session models may share one), built on first use.
        self._inner: dict[str, LLMSummarizer] = {}
        self._by_model: dict[str, Summarizer | None] = {}
        #: The summariser named by ``summarizer_model`` (None: each session's model decides).
        self.summarizer: Summarizer | None = self.summarizer_for(None)
        self._running: dict[str, asyncio.Task[None]] = {}
        #: request id -> the failure its session owed it, taken from the state in ``before``
        self._owed: dict[str, list[Decision]] = {}

    @property
    def wait_s(self) -> float:
        """How long a turn waits for a summary or checkpoint another process is making."""
        return self.policy.summarizer_timeout_s + WAIT_MARGIN_S

    def summarizer_for(self, session_model: ModelConfig | None, session: str = "") -> Summarizer | None:
        """The summariser of ``session_model``'s sessions (None: extractive), claimed across replicas
        within ``session`` (the scoped key: another session never adopts this one's summaries)."""
        key = session_model.name if session_model is not None else ""
        if key not in self._by_model:
            self._by_model[key] = self._claimed_for(session_model)
        found = self._by_model[key]
        return found.for_session(session) if isinstance(found, ClaimedSummarizer) and session else found

    def _claimed_for(self, session_model: ModelConfig | None) -> Summarizer | None:
        """The summariser chosen for ``session_model``, wrapped to claim its calls (made once per model)."""
        chosen = summarizer_model(self._settings, session_model)
        found: Summarizer | None = None
        if chosen is not None:
            inner = self._inner.get(chosen.name)
            if inner is None:
                inner = self._inner[chosen.name] = LLMSummarizer(
                    model=chosen,
                    api_key=UpstreamRouter.provider_key(chosen),
                    timeout_s=self.policy.summarizer_timeout_s,
                )
            shares = shares_cache(chosen, session_model)
            found = ClaimedSummarizer(inner, self._sessions, wait_s=self.wait_s, shares_cache=shares)
        return found

    async def adopt(self, state: SessionState) -> SessionState:
        """Add the checkpoints finished for this session (by any process) that its state lacks.

        A checkpoint still being prepared is waited for (bounded), so the turn after a
        preparation assembles the same request whichever replica receives it.
        """
        if not (self.policy.enabled and self.policy.reuse_checkpoints):
            return state
        found = await published_checkpoints(self._sessions, state.session_id, self.wait_s)
        return adopt_checkpoints(state, found, self.policy)

    async def publish(self, before: SessionState, after: SessionState) -> None:
        """Store checkpoints this turn made in-pass append-only, so no concurrent save can lose them."""
        have = {c.range_hash for c in before.checkpoints}
        new = [c for c in after.checkpoints if c.range_hash not in have]
        if new:
            await store_call(self._sessions, publish_checkpoints, self._sessions, after.session_id, new)

    async def before(self, ctx: Context, turn: Turn) -> Context:
        """The context with the session's published checkpoints adopted (the edge's ``before``)."""
        adopted = await self.adopt(ctx.session)
        owed = _owed_list(adopted.extra.get(OWED_KEY))
        if owed:  # reported by this turn, so dropped from the state it saves
            self._owed[turn.request_id] = [_owed_decision(d) for d in owed]
            while len(self._owed) > MAX_OWED_REPORTS:  # requests that failed before ``after`` took theirs
                self._owed.pop(next(iter(self._owed)))
            adopted = replace(adopted, extra={k: v for k, v in adopted.extra.items() if k != OWED_KEY})
        return ctx if adopted is ctx.session else ctx.replace(session=adopted)

    async def after(
        self, turn: Turn, original: Context, assembled: Context, decisions: Sequence[Decision]
    ) -> list[Decision]:
        """Publish this turn's checkpoints, prepare the next one ahead; the preparation's decisions."""
        await self.publish(original.session, assembled.session)
        prepared = await self.prepare(original, assembled)
        return [*([prepared] if prepared else []), *self.reports(turn.request_id)]

    def reports(self, request_id: str) -> list[Decision]:
        """Decisions from its session's background preparation owed to this request (found in ``before``)."""
        return self._owed.pop(request_id, [])

    async def prepare(self, original: Context, assembled: Context) -> Decision | None:
        """Start preparing the next checkpoint if this session passed ``prepare_at``; say so as a Decision.

        Only the process that wins the checkpoint's claim prepares it; the others return None.
        """
        session_id = assembled.session.session_id
        if session_id in self._running:
            return None
        plan = plan_compaction(original, assembled, for_window(self.policy, original.env.context_window))
        if plan is None:
            return None
        if not await store_call(self._sessions, self._sessions.claim, checkpoint_key(session_id, plan.key)):
            return None
        summarizer = self.summarizer_for(self._settings.model(assembled.env.model), session_id)
        task = asyncio.get_running_loop().create_task(self._prepare(session_id, plan, assembled, summarizer))
        self._running[session_id] = task
        task.add_done_callback(lambda _: self._running.pop(session_id, None))
        return Decision(
            "compact_history",
            "prepared",
            reason=f"request passed {self.policy.prepare_at:.0%} of the context window; next summary prepared ahead",
            detail={
                "threshold": self.policy.threshold,
                "prepare_at": self.policy.prepare_at,
                "start": plan.start,
                "end": plan.end,
                "summarizer": getattr(summarizer, "name", "extractive"),
            },
        )

    async def _prepare(
        self, session_id: str, plan: CompactionPlan, ctx: Context, summarizer: Summarizer | None
    ) -> None:
        key = checkpoint_key(session_id, plan.key)
        try:
            with summary_bill() as bill:  # the summariser's calls, billed to the session's next request
                result = await asyncio.to_thread(prepare, plan, ctx, self.policy, summarizer)
        except Exception as exc:  # a failed preparation only means the crossing turn summarises itself
            log.exception("preparing a summary for session %s failed", session_id)
            await store_call(self._sessions, self._sessions.finish, key, failed_result(exc))
            await self._owe_bill(session_id, bill.decisions())
            return
        await self._owe_bill(session_id, bill.decisions())
        cp = result.checkpoint
        if result.failures:
            await self._owe_failure(session_id, cp, result.failures, getattr(summarizer, "name", "?"))
        await store_call(self._sessions, self._sessions.finish, key, checkpoint_result(cp))

    async def _owe_failure(self, session_id: str, cp: Checkpoint, failures: tuple[str, ...], name: str) -> None:
        log.warning(
            "summariser %s failed preparing session %s (%s); the extractive summary was prepared instead",
            name,
            session_id,
            failures[0],
        )
        owed = Decision(
            "compact_history",
            "summarizer_failed",
            reason="the configured summariser failed while preparing a summary ahead; the extractive one was prepared",
            detail={
                "failures": list(failures),
                "threshold": self.policy.threshold,
                "start": cp.start,
                "end": cp.end,
                "summarizer": cp.summarizer,
                "prepared_ahead": True,
            },
        )
        try:
            await self._sessions.update(session_id, partial(_owe, [owed.to_dict()]))
        except Exception:  # the store failing only loses the report; the failure is logged above
            log.exception("could not record the owed summariser failure of session %s", session_id)

    async def start(self) -> None:
        """Nothing to load: checkpoints live in the session store."""

    async def stop(self) -> None:
        """Let the preparations in flight finish (a shutdown loses none), then close the summarisers."""
        await self.drain()
        self.close()

    async def _owe_bill(self, session_id: str, billed: Sequence[Decision]) -> None:
        """What a summary prepared ahead was billed, owed to the session's next request (its calls were made
        after the request that started them was answered): that request's billed usage includes them."""
        if not billed:
            return
        try:
            await self._sessions.update(session_id, partial(_owe, [d.to_dict() for d in billed]))
        except Exception:  # the store failing loses the bill from the figures; the metric of the calls stays
            log.exception("could not record the summariser usage owed by session %s", session_id)

    async def drain(self) -> None:
        """Wait for every preparation in flight (shutdown, tests, benchmarks)."""
        while self._running:
            await asyncio.gather(*list(self._running.values()), return_exceptions=True)

    def close(self) -> None:
        for inner in self._inner.values():
            inner.close()
