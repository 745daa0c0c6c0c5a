"""The capsule's strategies for a text that does not fit: extract for lookups, summarise for the rest.

- ``extract_relevant``: query-focused chunk-and-extract. Sliding windows with overlap are
  scored lexically against the question; the best are kept verbatim, in document order,
  with omission markers between them. Costs no summariser call.
- ``summarize_chain``: one summary per chunk, each told the previous one (a chain).
- ``summarize_hierarchy``: chunk summaries, then summaries of groups of those summaries,
  level by level until the result fits.

Summaries come from the injected summariser when there is one, else from an extractive
summariser (the sentences densest in the text's frequent terms, in their original order),
so the gateway shrinks text with no network at all. Every strategy is bounded by a cap
on summariser calls, checked before the first call. Pure: no I/O besides the injected
summariser, which the caller owns.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from gateway.assembly.context import Summarizer
from gateway.assembly.text_relevance import relevance_scores, split_units, terms, window_spans, windows

Count = Callable[[str], int]
OMITTED = "\n[... {n} tokens omitted by the gateway ...]\n"


@dataclass(frozen=True, slots=True)
class Condensed:
    """The shortened text and what it cost: summariser calls, failures and the pieces it looked at."""

    text: str
    calls: int = 0
    failures: int = 0
    pieces: int = 0
    kept_pieces: int = 0


def extract_relevant(text: str, query: str, budget: int, size: int, overlap: int, count: Count) -> Condensed:
    """Keep the windows of ``text`` most relevant to ``query`` within ``budget`` tokens, in document order."""
    units = split_units(text, size, count)
    counts = [n for _, n in units]
    spans = window_spans(counts, size, overlap)
    scores = relevance_scores(query, ["".join(u for u, _ in units[a:b]) for a, b in spans])
    order = sorted(range(len(spans)), key=lambda i: (-scores[i], i))
    marker = count(OMITTED.format(n=10**6))  # the widest marker a gap can need
    chosen: set[int] = set()
    spent = 0
    for i in order:
        a, b = spans[i]
        new = sum(counts[j] for j in range(a, b) if j not in chosen)
        if spent + new + marker > budget:
            continue
        chosen.update(range(a, b))
        spent += new + marker
    kept = len({i for i in range(len(spans)) if set(range(*spans[i])) <= chosen})
    return Condensed(_render_runs(units, chosen), pieces=len(spans), kept_pieces=kept)


def _render_runs(units: Sequence[tuple[str, int]], chosen: set[int]) -> str:
    """The chosen units verbatim, each gap replaced by a marker that says how much was left out."""
    out: list[str] = []
    gap = 0
    for i, (unit, n) in enumerate(units):
        if i in chosen:
            if gap:
                out.append(OMITTED.format(n=gap))
                gap = 0
            out.append(unit)
        else:
            gap += n
    if gap:
        out.append(OMITTED.format(n=gap))
    return "".join(out)


def summarize_extractive(text: str, budget: int, count: Count) -> str:
    """Keep the sentences densest in the text's frequent terms (numbers count double) within ``budget``."""
    units = split_units(text, max(budget, 1), count)
    freq = Counter(t for u, _ in units for t in terms(u))

    def weight(unit: str) -> float:
        words = terms(unit)
        bonus = sum(1 for w in words if any(ch.isdigit() for ch in w))
        return (sum(freq[w] for w in set(words)) + bonus * max(freq.values(), default=1)) / math.sqrt(len(words) + 1)

    ranked = sorted(range(len(units)), key=lambda i: (-weight(units[i][0]), i))
    chosen: set[int] = set()
    spent = 0
    for i in ranked:
        if spent + units[i][1] <= budget:
            chosen.add(i)
            spent += units[i][1]
    return "".join(units[i][0] for i in sorted(chosen)).strip()


def _summarize(
    chunk: str, previous: str | None, budget: int, summarizer: Summarizer | None, count: Count
) -> tuple[str, int, int]:
    """One summary within ``budget`` tokens: (text, calls, failures). A failing summariser falls back to extractive."""
    if summarizer is None:
        return summarize_extractive(chunk, budget, count), 0, 0
    try:
        text = summarizer(({"role": "user", "content": chunk},), previous, budget)
    except Exception:  # the seam's contract: any failure falls back to extractive
        return summarize_extractive(chunk, budget, count), 1, 1
    if count(text) > budget:
        text = summarize_extractive(text, budget, count)
    return text, 1, 0


def plan_calls(tokens: int, budget: int, chunk_tokens: int) -> tuple[int, int]:
    """Return (level-1 chunks, total summariser calls) a hierarchy needs to bring ``tokens`` under ``budget``."""
    chunks = max(1, math.ceil(tokens / chunk_tokens))
    calls, level = chunks, chunks
    per_summary = max(1, budget // max(1, chunks))
    while level * per_summary > budget and level > 1:
        level = math.ceil(level / 2)
        calls += level
    return chunks, calls


def _chain(
    text: str, budget: int, chunk_tokens: int, max_calls: int, summarizer: Summarizer | None, count: Count
) -> tuple[list[str], int, int, int]:
    """Summaries of each chunk (each told the previous one), calls, failures, chunks.

    Chunks past the call cap (sentence boundaries can make one more chunk than planned)
    are summarised extractively.
    """
    chunks = windows(text, chunk_tokens, 0, count) or [""]
    share = max(1, budget // len(chunks) - 2)
    out: list[str] = []
    calls = failures = 0
    previous: str | None = None
    for chunk in chunks:
        capped = summarizer if calls < max_calls else None
        summary, c, f = _summarize(chunk, previous, share, capped, count)
        out.append(summary)
        calls, failures, previous = calls + c, failures + f, summary
    return out, calls, failures, len(chunks)


def summarize_chain(
    text: str, budget: int, chunk_tokens: int, max_calls: int, summarizer: Summarizer | None, count: Count
) -> Condensed:
    """Summarise each chunk into an equal share of ``budget``, each call told the previous summary."""
    parts, calls, failures, n = _chain(text, budget, chunk_tokens, max_calls, summarizer, count)
    return Condensed("\n\n".join(parts), calls, failures, n, n)


def summarize_hierarchy(
    text: str, budget: int, chunk_tokens: int, max_calls: int, summarizer: Summarizer | None, count: Count
) -> Condensed:
    """Summarise chunks, then pairs of summaries, level by level, until the whole fits ``budget``."""
    parts, calls, failures, n = _chain(text, budget * 2, chunk_tokens, max_calls, summarizer, count)
    while count("\n\n".join(parts)) > budget and len(parts) > 1:
        share = max(1, budget // -(-len(parts) // 2))
        merged: list[str] = []
        for i in range(0, len(parts), 2):
            group = "\n\n".join(parts[i : i + 2])
            if summarizer is not None and calls >= max_calls:
                summary, c, f = summarize_extractive(group, share, count), 0, 0
            else:
                summary, c, f = _summarize(group, None, share, summarizer, count)
            merged.append(summary)
            calls, failures = calls + c, failures + f
        parts = merged
    joined = "\n\n".join(parts)
    if count(joined) > budget:
        joined = summarize_extractive(joined, budget, count)
    return Condensed(joined, calls, failures, n, n)
