"""The summaries a served session was sent, as a summariser ``replay whatif --policy served`` can call offline.

A gateway that summarised with a model (``summarizer_model``) wrote texts no offline replay can
write again: the replay's extractive fallback sends other bytes, so from the first compaction on
its tokens per turn differed from the served ones (the compactions matched, the figures did not).
Every summary the gateway sent is in the stored request it was sent with, as a
``<summary of="messages S-E" by="NAME">`` message standing in for the client's messages
``S..E``; the call that wrote it summarised ``messages[span_start:E+1]``, continuing the summary
of an earlier range with the same start, or none. So a summary is found again by the hash of the
span it was asked for and the summary it continued, else by the span alone (a summary prepared
ahead in the background and continued by the crossing turn was never sent, so the text it
continued is not stored, only where its span ended): the replay's call gets the served text, and
a call for a span the gateway never summarised (another policy, or one chunk of a span too long
for one call) raises, so the pass falls back to the extractive summary, as it would have live.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from gateway.assembly.compaction_layout import range_hash
from gateway.assembly.context import Message

#: The frame ``compaction_layout.summary_message`` writes around a summary's text.
_FRAME = re.compile(r'\A<summary of="messages (\d+)-(\d+)" by="([^"]*)">\n(.*)\n</summary>\Z', re.S)
EXTRACTIVE = "extractive"


@dataclass(frozen=True, slots=True)
class ServedSummary:
    """One summary as sent: the client's messages ``start:end`` (end exclusive) it stood in for."""

    start: int
    end: int
    by: str
    text: str


def served_summaries(original: Sequence[Message], assembled: Sequence[Message]) -> list[ServedSummary]:
    """The summaries in one forwarded request; indices are the client's (``original``'s) messages."""
    out = []
    for m in assembled:
        content = m.get("content")
        found = _FRAME.match(content) if isinstance(content, str) else None
        if found is None:
            continue
        start, last = int(found.group(1)), int(found.group(2))
        if 0 <= start <= last < len(original):
            out.append(ServedSummary(start, last + 1, found.group(3), found.group(4)))
    return out


@dataclass(slots=True)
class ServedSummarizer:
    """A ``Summarizer`` answering from the summaries the gateway sent (named as the served one was)."""

    name: str
    texts: dict[tuple[str, str | None], str] = field(default_factory=dict)
    #: By the span alone: a summary continuing one prepared ahead and never sent (its text is not stored)
    by_span: dict[str, str] = field(default_factory=dict)
    calls: int = 0
    misses: int = 0

    def __call__(self, messages: tuple[Message, ...], previous: str | None, max_tokens: int) -> str:
        self.calls += 1
        span = range_hash(messages)
        text = self.texts.get((span, previous), self.by_span.get(span))
        if text is None:
            self.misses += 1
            raise LookupError("the served session sent no summary of this span: the extractive one stands in")
        return text


def served_summarizer(pairs: Iterable[tuple[Mapping[str, Any], Mapping[str, Any]]]) -> ServedSummarizer | None:
    """The summariser of a served session, from its (original, assembled) bodies, oldest first; None when
    every summary it sent was extractive (the replay's own extractive summariser writes those bytes again)."""
    found: dict[ServedSummary, tuple[Message, ...]] = {}  # later turns resend the same summary: once each
    for original_body, assembled_body in pairs:
        original = tuple(original_body.get("messages") or ())
        for s in served_summaries(original, tuple(assembled_body.get("messages") or ())):
            found.setdefault(s, original)
    sent = [(original, s) for s, original in found.items()]
    texts: dict[tuple[str, str | None], str] = {}
    by_span: dict[str, str] = {}
    names: list[str] = []
    for original, s in sent:
        if s.by == EXTRACTIVE or s.by.endswith("+" + EXTRACTIVE):  # the model failed: the replay falls back too
            continue
        names.append(s.by)
        texts[(range_hash(original[s.start : s.end]), None)] = s.text
        # a range that continued an earlier summary starting where it does was asked for its new span only
        for _, p in sent:
            if p.start == s.start and p.end < s.end:
                texts[(range_hash(original[p.end : s.end]), p.text)] = s.text
        for cut in range(s.start + 1, s.end):  # where a summary prepared ahead (and never sent) may have ended
            by_span.setdefault(range_hash(original[cut : s.end]), s.text)
    if not names:
        return None
    return ServedSummarizer(max(set(names), key=names.count), texts, by_span)
