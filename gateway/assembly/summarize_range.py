"""Summarise one aged range of history into a checkpoint, never losing it to a failed summary.

The input is bounded and incremental: the previous checkpoint's summary plus only the
messages aged since, fed to the summariser in chunks of at most
``summarizer_input_tokens`` (each chunk folds into the running summary, so the result
is hierarchical and its size never grows past ``summary_max_tokens``).

Every summary is checked before it is accepted: the facts of its input (numbers,
identifiers, dates, URLs, paths, tool names; not the ids that only label a templated
reply, see ``summarize.salience``) must still be in it. A summariser that
raises, returns nothing, or drops more than ``max_dropped_share`` of the facts is
replaced by the extractive summary for that chunk. What the accepted summary still
dropped is appended as a short "also mentioned" line while the budget allows, and
recorded either way.

The only I/O is whatever the injected summariser does; this module itself is pure.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial

from gateway.assembly.compaction_layout import range_hash
from gateway.assembly.compaction_policy import CompactionPolicy
from gateway.assembly.context import Checkpoint, Message, SentPrefix, Summarizer
from gateway.assembly.sent_prefix import continuing
from gateway.summarize.continued import continues
from gateway.summarize.extractive import ALSO_MENTIONED, ExtractiveSummarizer, says, with_also
from gateway.summarize.facts import missing_facts
from gateway.summarize.salience import salient_facts
from gateway.summarize.transcript import tool_names, transcript_lines
from gateway.tokens import TokenCounter

_ALSO = ALSO_MENTIONED
#: One summariser call: ``(span, previous summary, max tokens) -> summary``.
SummaryCall = Callable[[tuple[Message, ...], str | None, int], str]


@dataclass(frozen=True, slots=True)
class RangeSummary:
    checkpoint: Checkpoint
    calls: int  # summariser calls made (one per chunk)
    dropped: tuple[str, ...]  # facts of the range missing from the final summary
    failures: tuple[str, ...]  # why the configured summariser was not used, per failed chunk


def chunks(messages: Sequence[Message], budget: int, counter: TokenCounter) -> list[tuple[Message, ...]]:
    """Split ``messages`` into runs of at most ``budget`` tokens, never starting a run at a tool result."""
    out: list[tuple[Message, ...]] = []
    current: list[Message] = []
    size = 0
    for m in messages:
        cost = counter.message(m)
        if current and size + cost > budget and m.get("role") != "tool":
            out.append(tuple(current))
            current, size = [], 0
        current.append(m)
        size += cost
    if current:
        out.append(tuple(current))
    return out


def fit(text: str, max_tokens: int, counter: TokenCounter) -> str:
    """Keep whole lines of ``text`` while they fit in ``max_tokens`` (the hard bound of a summary)."""
    if counter.text(text) <= max_tokens:
        return text
    kept: list[str] = []
    spent = 0
    for line in text.splitlines():
        cost = counter.text(line) + 1
        if spent + cost > max_tokens:
            break
        kept.append(line)
        spent += cost
    return "\n".join(kept)


def _repair(summary: str, dropped: list[str], max_tokens: int, counter: TokenCounter) -> str:
    """Append the dropped facts on one line, as many as the budget allows."""
    room = max_tokens - counter.text(summary) - 1 - counter.text(_ALSO)
    if summary.rsplit("\n", 1)[-1].startswith(_ALSO):
        room += 1 + counter.text(_ALSO) - counter.text(", ")  # joins the line there is
    kept: list[str] = []
    for fact in dropped:
        room -= counter.text(fact + ", ")
        if room < 0:
            break
        kept.append(fact)
    return with_also(summary, kept)


def kept_text(after: Sequence[Message]) -> str:
    """What the user and the assistant said in the rounds a compaction keeps after its range, one text.

    Those rounds stay in the request word for word while the summary is in use (the next fold
    summarises them in turn), so a fact they say is covered already. Tool results are left out:
    clearing may replace them before the summary is next folded."""
    return "\n".join(text for speaker, text in transcript_lines(after) if speaker in ("user", "assistant"))


def _facts(span: Sequence[Message], previous: str | None) -> list[str]:
    return salient_facts([("summary", previous or ""), *transcript_lines(span)], extra=tool_names(span))


def _fold(
    span: tuple[Message, ...],
    previous: str | None,
    summarizer: SummaryCall | None,
    extractive: ExtractiveSummarizer,
    policy: CompactionPolicy,
    counter: TokenCounter,
    kept: str = "",
) -> tuple[str, str | None]:
    """One summariser call: the new running summary and, if the configured one failed, why.

    The model's summary is rejected when it returns nothing or drops more than
    ``max_dropped_share`` of the facts while the extractive summary keeps more of them
    (a fact-dense span may not fit any summary of this size; then the model's is kept).
    """
    limit = policy.summary_max_tokens
    facts = [f for f in _facts(span, previous) if not says(kept, f)]  # what the kept rounds say is not lost
    fallback = fit(extractive(span, previous, limit, kept), limit, counter)
    fallback_lost = missing_facts(facts, fallback)
    failure: str | None = None
    if summarizer is not None:
        try:
            text = fit(summarizer(span, previous, limit).strip(), limit, counter)
        except Exception as exc:  # any summariser failure must fall back, never lose the range
            failure = f"{type(exc).__name__}: {exc}"[:300]
        else:
            lost = missing_facts(facts, text)
            if not text:
                failure = "returned no usable text"
            elif facts and len(lost) / len(facts) > policy.max_dropped_share and len(fallback_lost) < len(lost):
                failure = f"dropped {len(lost)} of {len(facts)} facts (extractive dropped {len(fallback_lost)})"
            else:
                return _repair(text, lost, limit, counter), None
    return _repair(fallback, fallback_lost, limit, counter), failure


def summarize_range(
    messages: Sequence[Message],
    start: int,
    end: int,
    previous: Checkpoint | None,
    summarizer: Summarizer | None,
    policy: CompactionPolicy,
    counter: TokenCounter,
    sent: SentPrefix | None = None,
) -> RangeSummary:
    """Summarise ``messages[start:end]``, continuing ``previous`` (which covers ``start:previous.end``).

    ``sent``: the session's sent request cut after the range (``sent_prefix``). A summariser that shares
    the session's cache is asked once, as that request's continuation, when that costs less than the
    compact requests of the range's chunks (``summarize.continued``)."""
    running = previous.summary if previous is not None else None
    span_start = previous.end if previous is not None else start
    extractive = ExtractiveSummarizer(counter)
    budget = max(1, policy.summarizer_input_tokens - policy.summary_max_tokens)
    failures: list[str] = []
    calls = 0
    spans = chunks(messages[span_start:end], budget, counter)
    kept = kept_text(messages[end:])
    limit = policy.summary_max_tokens
    call: SummaryCall | None = summarizer
    model = continuing(summarizer)
    if model is not None and sent is not None and continues(sent, spans, running, limit, counter):
        spans, call = [tuple(messages[span_start:end])], partial(model.continued, sent)
    for chunk in spans:
        running, failure = _fold(chunk, running, call, extractive, policy, counter, kept)
        calls += 1
        if failure is not None:
            failures.append(failure)
    summary = running or ""
    used = "extractive"
    if summarizer is not None and len(failures) < calls:
        used = summarizer.name if not failures else f"{summarizer.name}+extractive"
    said = _facts(messages[span_start:end], previous.summary if previous else None)
    dropped = missing_facts([f for f in said if not says(kept, f)], summary)
    cp = Checkpoint(range_hash(messages[start:end]), start, end, summary, used)
    return RangeSummary(cp, calls, tuple(dropped), tuple(failures))
