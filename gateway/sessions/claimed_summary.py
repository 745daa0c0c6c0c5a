"""One summariser call per input across every replica: claim it, or wait for who did.

Replicas that assemble consecutive (or concurrent) turns of one conversation can reach
the same range at the same time: the background preparation on one, the crossing turn
on another. ``ClaimedSummarizer`` wraps the configured summariser so that each distinct
call (the span, the summary it continues, the token limit, the summariser's name) is
made once: the caller whose ``claim`` wins calls the model and stores the text on the
claim (append-only, in ``session_claims.result``); every other caller polls for that
text and returns it, so every replica builds byte-identical summaries.

A loser never calls the model. If the winner fails, it stores the failure and the
losers raise too (the compaction pass then falls back to the extractive summary, as the
winner did). If the winner vanishes (a crashed replica), the first loser to run out of
patience stores a failure, so later turns do not wait again.

Runs in a worker thread (the summariser does blocking I/O already); the store calls block.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable

import orjson

from gateway import metrics
from gateway.assembly.context import ContinuingSummarizer, Message, SentPrefix, Summarizer
from gateway.sessions.protocol import SessionStore

CLAIM_PREFIX = "sum:"
POLL_S = 0.05


class SummaryUnavailable(RuntimeError):
    """Another replica owns this summary and it failed or never arrived; fall back to extractive."""


def summary_key(
    name: str, messages: tuple[Message, ...], previous: str | None, max_tokens: int, session: str = ""
) -> str:
    """The claim key of one summariser call: a hash of everything the call's answer depends on, in ``session``.

    The session (the scoped key, caller included) is part of it: the claim is there so one conversation's
    replicas make its summary once, not so another session, or another caller, adopts a text it never
    paid for. A continued call (``shares_cache``) is made on the session's own sent prefix (its system
    prompt, its tools), which the rest of the key does not name, so a text made for one caller's prefix
    could carry that prefix into another caller's summary of the same messages."""
    h = hashlib.sha256()
    h.update(orjson.dumps([name, previous, max_tokens, list(messages), session], option=orjson.OPT_SORT_KEYS))
    return CLAIM_PREFIX + h.hexdigest()


def wait_for_result(sessions: SessionStore, key: str, wait_s: float) -> str | None:
    """Poll a claim's result for up to ``wait_s`` seconds; None if it never arrived."""
    deadline = time.monotonic() + wait_s
    while True:
        found = sessions.result(key)
        if found is not None or time.monotonic() >= deadline:
            return found
        time.sleep(POLL_S)


class ClaimedSummarizer:
    """A ``Summarizer`` that makes each distinct call once across all processes sharing ``sessions``.

    ``shares_cache``: the summariser is the session's model at the same upstream, so a summary may be
    asked as the continuation of the session's sent request (``summarize.continued``); the claim is the
    same either way (the same range, summary and limit), so every replica adopts the one text made."""

    def __init__(
        self,
        inner: Summarizer,
        sessions: SessionStore,
        *,
        wait_s: float,
        shares_cache: bool = False,
        session: str = "",
    ) -> None:
        self.inner = inner
        self.name = inner.name
        self.shares_cache = shares_cache and isinstance(inner, ContinuingSummarizer)
        self.session = session
        self._sessions = sessions
        self._wait_s = wait_s

    def for_session(self, session: str) -> ClaimedSummarizer:
        """This summariser claiming within ``session`` (a scoped key): its calls are shared by that session's
        turns on every replica, and by no other session."""
        if session == self.session:
            return self
        return ClaimedSummarizer(
            self.inner, self._sessions, wait_s=self._wait_s, shares_cache=self.shares_cache, session=session
        )

    def __call__(self, messages: tuple[Message, ...], previous: str | None, max_tokens: int) -> str:
        return self._claimed(messages, previous, max_tokens, lambda: self.inner(messages, previous, max_tokens))

    def continued(self, sent: SentPrefix, messages: tuple[Message, ...], previous: str | None, max_tokens: int) -> str:
        inner = self.inner
        if not isinstance(inner, ContinuingSummarizer):
            raise TypeError(f"summariser {self.name!r} cannot continue a sent request")
        call = lambda: inner.continued(sent, messages, previous, max_tokens)  # noqa: E731
        return self._claimed(messages, previous, max_tokens, call)

    def _claimed(
        self, messages: tuple[Message, ...], previous: str | None, max_tokens: int, call: Callable[[], str]
    ) -> str:
        key = summary_key(self.name, messages, previous, max_tokens, self.session)
        if self._sessions.claim(key):
            metrics.SUMMARY_CLAIMS.labels("called").inc()
            return self._summarise(key, call)
        found = wait_for_result(self._sessions, key, self._wait_s)
        if found is None:
            self._sessions.finish(key, orjson.dumps({"error": "the claiming replica did not finish"}).decode())
            found = self._sessions.result(key)
        outcome = orjson.loads(found or "{}")
        if "text" not in outcome:
            metrics.SUMMARY_CLAIMS.labels("failed").inc()
            raise SummaryUnavailable(f"summary made by another replica failed: {outcome.get('error')}")
        metrics.SUMMARY_CLAIMS.labels("reused").inc()
        return str(outcome["text"])

    def _summarise(self, key: str, call: Callable[[], str]) -> str:
        try:
            text = call()
        except Exception as exc:
            self._sessions.finish(key, orjson.dumps({"error": f"{type(exc).__name__}: {exc}"[:300]}).decode())
            raise
        self._sessions.finish(key, orjson.dumps({"text": text}).decode())
        return text
