"""Say in one line each what compaction did to a stored request: which rounds, which tools.

The inspector's request page and ``ventana inspect`` both print these, from the decisions as
stored (dicts), so a reader sees "rounds 3-17 (messages 4-40; read_file x9, bash x6)
summarised" and "cleared 5 tool results: read_file #12, ..." instead of one row per result.
Decisions recorded before the round details existed still give a line, with what they have.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

MAX_NAMED_RESULTS = 12  # a clearing line names this many results, then "and N more"


def _tokens_saved(decisions: Sequence[Mapping[str, Any]]) -> int:
    return sum(int(d.get("tokens_before") or 0) - int(d.get("tokens_after") or 0) for d in decisions)


def cleared_line(cleared: Sequence[Mapping[str, Any]]) -> str:
    """One line for every ``cleared`` decision of a request: how many, which tool at which message."""
    named = []
    for d in cleared[:MAX_NAMED_RESULTS]:
        detail = d.get("detail") or {}
        named.append(f"{detail.get('tool', '?')} #{detail.get('message_index', '?')}")
    more = f" and {len(cleared) - MAX_NAMED_RESULTS} more" if len(cleared) > MAX_NAMED_RESULTS else ""
    inputs = sum(1 for d in cleared if (d.get("detail") or {}).get("input_cleared"))
    with_inputs = f"; arguments of {inputs} calls too" if inputs else ""
    rounds = sorted({int(r) for d in cleared if (r := (d.get("detail") or {}).get("round")) is not None})
    where = f" in the rounds at messages {_span(rounds)}" if rounds else ""
    noun = "result" if len(cleared) == 1 else "results"
    saved = _tokens_saved(cleared)
    return f"cleared {len(cleared)} tool {noun}{where}: {', '.join(named)}{more}{with_inputs} ({saved:,} tokens saved)"


def summary_line(d: Mapping[str, Any]) -> str:
    """One line for a ``compacted`` or ``checkpoint_reused`` decision: the rounds and the tools they called."""
    detail = d.get("detail") or {}
    start, end = detail.get("start"), detail.get("end")
    messages = f"messages {start}-{int(end) - 1}" if isinstance(end, int) else f"messages from {start}"
    counts = detail.get("tool_counts")
    if isinstance(counts, Mapping) and counts:
        messages += "; " + ", ".join(f"{name} x{n}" for name, n in counts.items())
    elif detail.get("tools"):
        messages += "; " + ", ".join(map(str, detail["tools"]))
    numbers = detail.get("round_numbers")
    if isinstance(numbers, Sequence) and len(numbers) == 2:
        what = f"rounds {numbers[0]}-{numbers[1]} ({messages})"
    elif detail.get("round_count"):
        what = f"{detail['round_count']} rounds ({messages})"
    else:
        what = messages
    if d.get("action") == "checkpoint_reused":
        return f"{what}: summary resent, the same bytes as the previous turn"
    ahead = " (prepared ahead)" if detail.get("prepared_ahead") else ""
    return f"{what} summarised{ahead}, {_tokens_saved([d]):,} tokens saved"


def _span(indices: Sequence[int]) -> str:
    return str(indices[0]) if len(indices) == 1 else f"{indices[0]}-{indices[-1]}"


def compaction_lines(decisions: Sequence[Mapping[str, Any]]) -> list[tuple[str, str]]:
    """``(kind, line)`` for the request's clearing (one line) and each summary, in decision order."""
    out: list[tuple[str, str]] = []
    cleared = [d for d in decisions if d.get("pass") == "clear_tool_results" and d.get("action") == "cleared"]
    for d in decisions:
        if d is (cleared[0] if cleared else None):
            out.append(("cleared", cleared_line(cleared)))
        elif d.get("pass") == "compact_history" and d.get("action") in ("compacted", "checkpoint_reused"):
            out.append(("summary", summary_line(d)))
    return out
