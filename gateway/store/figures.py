"""One request's headline figures, as every page states them: from what was forwarded and billed.

``ventana logs``, ``ventana inspect`` and the inspector's pages all open with the same few facts,
so they are derived once, here, from the stored record: tokens the client sent against every
prompt the gateway forwarded (a served-tool loop forwards several; a negative saving is shown
as one), whether the assembly was reverted (and why), whether the prompt that went out was over
the model's window, whether the gateway refused the request before forwarding it, and the
served-tool steps with their tokens and billed usage.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from gateway.decision_tally import STEP_PASS, reverted, undone


@dataclass(frozen=True, slots=True)
class Step:
    """One upstream call of a request whose model called a tool the gateway serves."""

    call: int
    prompt_tokens: int  # counted on the body sent
    billed_prompt: int
    billed_completion: int
    billed_cached: int
    called: str | None  # the served tool it asked for; None: the answer the client got


@dataclass(frozen=True, slots=True)
class Figures:
    tokens_original: int
    tokens_forwarded: int  # every upstream call's prompt, summed
    reverted: str | None  # the revert's reason, when the assembly was undone
    over_window: tuple[int, int] | None  # (prompt tokens, window) of a prompt that went out over the window
    refused: bool
    steps: tuple[Step, ...]
    undone: frozenset[int]  # positions of the decisions a revert undid

    @property
    def saved(self) -> int:
        """Tokens saved; negative when more was forwarded than the client sent."""
        return self.tokens_original - self.tokens_forwarded

    @property
    def saved_share(self) -> float:
        return self.saved / self.tokens_original if self.tokens_original else 0.0

    def saved_text(self) -> str:
        """ "1,200 saved (35%)", or "420 more than the client sent (+12%)": never a negative saving as a saving."""
        if self.saved >= 0:
            return f"{self.saved:,} saved ({self.saved_share:.0%})"
        return f"{-self.saved:,} more than the client sent (+{-self.saved_share:.0%})"

    def flags(self) -> list[str]:
        """Short words for a list's row: refused, reverted, over window, N calls."""
        out = []
        if self.refused:
            out.append("refused")
        if self.reverted is not None:
            out.append("reverted")
        if self.over_window is not None:
            out.append("over window")
        if len(self.steps) > 1:
            out.append(f"{len(self.steps)} calls")
        return out


def figures(
    tokens_original: int,
    tokens_forwarded: int,
    decisions: Sequence[Mapping[str, Any]],
    budget: Mapping[str, Any] | None,
    *,
    refused: bool = False,
) -> Figures:
    undo = reverted(decisions)
    window = int((budget or {}).get("context_window") or 0)
    prompt = int((budget or {}).get("prompt_tokens") or 0)
    return Figures(
        tokens_original=tokens_original,
        tokens_forwarded=tokens_forwarded,
        reverted=None if undo is None else str(undo.get("reason") or undo.get("action")),
        over_window=(prompt, window) if window and prompt > window else None,
        refused=refused,
        steps=tuple(_step(d) for d in decisions if d.get("pass") == STEP_PASS),
        undone=frozenset(undone(decisions)),
    )


def _step(d: Mapping[str, Any]) -> Step:
    detail = d.get("detail") or {}
    billed = detail.get("billed") or {}
    return Step(
        call=int(detail.get("call") or 0),
        prompt_tokens=int(detail.get("prompt_tokens") or 0),
        billed_prompt=int(billed.get("prompt_tokens") or 0),
        billed_completion=int(billed.get("completion_tokens") or 0),
        billed_cached=int(billed.get("cached_tokens") or 0),
        called=detail.get("called"),
    )


def of_summary(summary: Any, decisions: Sequence[Mapping[str, Any]], budget: Mapping[str, Any] | None) -> Figures:
    """The figures of a stored request (``queries.RequestSummary``)."""
    return figures(summary.tokens_original, summary.tokens_assembled, decisions, budget, refused=bool(summary.refused))
