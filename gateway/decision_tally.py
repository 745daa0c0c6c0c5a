"""Count what the assembly passes did, generically, from the decisions a request recorded.

Metrics never import a pass: every pass reports through the shared Decision vocabulary
(docs/architecture.md), so a pass that lands later is counted the day it lands. This
module turns one request's decision dicts (``Decision.to_dict()``: pass, action,
tokens_before, tokens_after, detail) into plain numbers; ``metrics.observe`` adds them to
the Prometheus counters.

Labels must stay bounded: pass names, actions and lint check names come from code, but a
value that does not look like an identifier (a bug putting user text in a label) is
replaced by ``other`` rather than creating a new time series per request.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from gateway.upstream.usage import Usage

OTHER = "other"
_LABEL = re.compile(r"^[A-Za-z0-9_.:\-]{1,64}$")

#: The documented vocabulary, pass -> actions. Metrics start every pair at zero so that
#: dashboards show 0 (not "no data") for a pass that is on but has not acted yet.
VOCABULARY: Mapping[str, tuple[str, ...]] = {
    "move_volatile": ("moved", "learned"),
    "attach_documents": ("kept", "dropped", "chunked"),
    "prune_tools": ("pruned", "tool_set_changed", "kept_all"),
    "find_tools": ("expanded",),
    "clear_tool_results": ("cleared", "condensed"),
    "compact_history": ("compacted", "checkpoint_reused", "summarizer_failed", "prepared"),
    "recall_memory": ("recalled", "remembered", "recall_offered", "recall_served"),
    "restate_rules": ("restated", "omitted"),
    "render_reminder": ("rendered",),
    "place_cache_breakpoints": ("placed",),
    "lint_context": ("finding",),
    "verify_assembly": ("reverted",),
    "served_tools": ("round",),
    "summarizer": ("billed",),
}
#: The pass name of the steps a served-tool loop records, one per upstream call (edges/served_tools.py).
STEP_PASS = "served_tools"
#: The pass name of the decision billing a request's summariser-model calls (summarize/billing.py).
SUMMARIZER_PASS = "summarizer"
#: Actions that undo what was decided before them in the same request: the safety check's
#: revert, a pass that raised (the original went out), or any pass that undoes a plan.
UNDO_ACTIONS = frozenset({"reverted", "pass_failed"})


def safe_label(value: Any) -> str:
    """Return ``value`` as a label value if it looks like an identifier, else ``other``."""
    text = str(value) if value is not None else ""
    return text if _LABEL.match(text) else OTHER


def _int(value: Any) -> int:
    return int(value) if isinstance(value, int | float) and not isinstance(value, bool) else 0


def _count(value: Any) -> int:
    """A detail field that is either a number or a list of names (``removed``)."""
    if isinstance(value, list | tuple | set | frozenset):
        return len(value)
    return _int(value)


def is_undo(decision: Mapping[str, Any]) -> bool:
    """Whether ``decision`` undid what earlier decisions of its request did."""
    return decision.get("action") in UNDO_ACTIONS


def saved_by(decision: Mapping[str, Any]) -> int:
    """Tokens ``decision`` took out of its request (negative: tokens it added), as a pass's own change.

    An undo's ``tokens_before``/``tokens_after`` state the whole request (the client's tokens, then
    what was sent instead: the original, or a stage of the plan). That is not a change of its own:
    when a stage is kept, the decisions that built it already count the change, so counting the
    undo as well counted every fallback's savings twice (issue 37). An undo moves no tokens."""
    if is_undo(decision):
        return 0
    return _int(decision.get("tokens_before")) - _int(decision.get("tokens_after"))


def undone(decisions: Sequence[Mapping[str, Any]]) -> set[int]:
    """The positions of the decisions a later revert undid: they did not reach the provider.

    A revert (``UNDO_ACTIONS``) undoes every decision before it, or only those of the passes its
    ``detail.undoes`` names (a fallback that keeps part of a plan). A decision marked
    ``detail.undone: true`` is undone whatever follows it. Figures, compactions and pages skip
    these: a step that was undone is recorded as undone, never counted as done.
    """
    out: set[int] = set()
    for j, decision in enumerate(decisions):
        detail = decision.get("detail")
        detail = detail if isinstance(detail, Mapping) else {}
        if detail.get("undone") is True:
            out.add(j)
        if not is_undo(decision):
            continue
        names = detail.get("undoes")
        limit = {str(n) for n in names} if isinstance(names, list | tuple) else None
        for i in range(j):
            if not is_undo(decisions[i]) and (limit is None or decisions[i].get("pass") in limit):
                out.add(i)
    return out


def reverted(decisions: Sequence[Mapping[str, Any]]) -> Mapping[str, Any] | None:
    """The decision that reverted this request's assembly, if one did (the last such)."""
    found: Mapping[str, Any] | None = None
    for decision in decisions:
        if is_undo(decision):
            found = decision
    return found


def compacted(decisions: Sequence[Mapping[str, Any]]) -> bool:
    """Whether a summary first replaced a range in what this request forwarded (not undone)."""
    gone = undone(decisions)
    return any(
        d.get("pass") == "compact_history" and d.get("action") == "compacted" and i not in gone
        for i, d in enumerate(decisions)
    )


@dataclass(slots=True)
class DecisionTally:
    """The numbers one request contributes; every field is a non-negative count."""

    actions: Counter[tuple[str, str]] = field(default_factory=Counter)
    tokens_saved: Counter[str] = field(default_factory=Counter)
    tokens_added: Counter[str] = field(default_factory=Counter)
    compactions: int = 0
    summarizer_calls: int = 0
    summarizer_failures: int = 0
    tool_set_changes: int = 0
    tools_pruned: int = 0
    lint_findings: Counter[tuple[str, str]] = field(default_factory=Counter)
    reverted: int = 0  # requests whose assembly was reverted (0 or 1 per request)
    upstream_calls: int = 0  # the served loop's steps: every upstream call (0: the request went up once)
    summarizer_billed: int = 0  # summariser-model calls billed to the request, besides its forwarded calls


def tally_decisions(decisions: Iterable[Mapping[str, Any]]) -> DecisionTally:
    """Add up one request's decisions: actions, tokens saved or added per pass, and the named events.

    Decisions a later revert undid (``undone``) count as actions (they were decided) but neither
    their tokens nor their events (a compaction, a pruned tool) count: what went out did not have
    them. Summariser calls count either way: they were made and billed."""
    decisions = list(decisions)
    gone = undone(decisions)
    tally = DecisionTally()
    for i, decision in enumerate(decisions):
        name, action = safe_label(decision.get("pass")), safe_label(decision.get("action"))
        detail = decision.get("detail")
        detail = detail if isinstance(detail, Mapping) else {}
        tally.actions[(name, action)] += 1
        if is_undo(decision):
            tally.reverted = 1
        if name == STEP_PASS:
            tally.upstream_calls += 1
        elif name == SUMMARIZER_PASS and action == "billed":
            tally.summarizer_billed += _int(detail.get("calls"))
        if i in gone:
            if name == "compact_history" and action == "compacted":
                tally.summarizer_calls += _int(detail.get("summarizer_calls"))
            continue
        saved = saved_by(decision)
        if saved > 0:
            tally.tokens_saved[name] += saved
        elif saved < 0:
            tally.tokens_added[name] -= saved
        _count_event(tally, name, action, detail)
    return tally


def _count_event(tally: DecisionTally, name: str, action: str, detail: Mapping[str, Any]) -> None:
    if name == "compact_history":
        if action == "compacted":
            tally.compactions += 1
            tally.summarizer_calls += _int(detail.get("summarizer_calls"))
        elif action == "summarizer_failed":
            tally.summarizer_failures += 1
    elif name == "prune_tools":
        if action == "tool_set_changed" and not detail.get("first"):  # a session's first set is no change
            tally.tool_set_changes += 1
        elif action == "pruned":
            tally.tools_pruned += _count(detail.get("removed"))
    elif name == "find_tools" and action == "expanded":
        tally.tool_set_changes += 1  # the gateway grew the set for the model's search
    elif name == "lint_context" and action == "finding":
        check = safe_label(detail.get("check"))
        severity = safe_label(detail.get("severity") or "warning")
        tally.lint_findings[(check, severity)] += 1


def _billed(decision: Mapping[str, Any]) -> Mapping[str, Any]:
    detail = decision.get("detail")
    billed = detail.get("billed") if isinstance(detail, Mapping) else None
    return billed if isinstance(billed, Mapping) else {}


def billed_usage(usage: Usage, decisions: Sequence[Mapping[str, Any]]) -> Usage:
    """``usage`` (the provider's, over the request's forwarded calls) plus what its summariser calls billed."""
    extra = [_billed(d) for d in decisions if d.get("pass") == SUMMARIZER_PASS and d.get("action") == "billed"]
    if not extra:
        return usage
    return Usage(
        usage.prompt_tokens + sum(int(b.get("prompt_tokens") or 0) for b in extra),
        usage.completion_tokens + sum(int(b.get("completion_tokens") or 0) for b in extra),
        usage.cached_tokens + sum(int(b.get("cached_tokens") or 0) for b in extra),
        usage.cache_write_tokens + sum(int(b.get("cache_write_tokens") or 0) for b in extra),
        usage.evaluated_tokens,
        usage.reused_tokens,
    )
