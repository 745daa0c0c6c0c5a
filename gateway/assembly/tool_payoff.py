"""Decide whether pruning a session's tools pays, and how the selection is sent.

Tool definitions open the prompt, so they sit in the provider's cached prefix: from the
second turn on, a removed tool token saves only the cached price of a token (``r`` =
cached input price / input price, from litellm's model info), while every change of the
tool set re-sends the whole prompt after the tools uncached, plus, as the change comes from
a ``find_tools`` call, one extra upstream call whose prompt was cached. In units of one
uncached input token:

    saving over the horizon = horizon_turns * removed_tokens * max(r, 1 / horizon_turns)
    expected cost          = expected_changes * (prompt_tokens + tool_tokens) * (1 + r)

``mode: auto`` prunes (with ``find_tools``; on Anthropic with ``defer_loading``, whose search
never changes the prefix) only when the saving is larger, and sends every tool untouched
otherwise. The decision is made once per session, with its first tool set, and kept, so
the session never flips between the two and breaks its cache doing so. ``allowed_tools``
saves no token (the full list is still sent), so ``auto`` never picks it; name it in
``mode`` to narrow the model's choice while keeping the cache.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Plan = Literal["all", "prune", "allowed_tools", "defer_loading"]
#: Session state key holding the plan decided with the session's first tool set.
PLAN_KEY = "tool_plan"


@dataclass(frozen=True, slots=True)
class Payoff:
    """The estimate behind a plan, in uncached input tokens (kept in the decision's detail)."""

    saving: float
    cost: float

    @property
    def pays(self) -> bool:
        return self.saving > self.cost


def payoff(
    *,
    tool_tokens: int,
    removed_tokens: int,
    prompt_tokens: int,
    cache_ratio: float,
    horizon_turns: int,
    expected_changes: float,
) -> Payoff:
    """Saving and cost of pruning ``removed_tokens`` of ``tool_tokens`` for the next ``horizon_turns``.

    A ratio of 1 (no cache discount) makes every removed token count in full; below
    ``1 / horizon_turns`` the first, uncached, turn dominates the saving.
    """
    ratio = min(1.0, max(cache_ratio, 1.0 / max(horizon_turns, 1)))
    saving = horizon_turns * removed_tokens * ratio
    cost = expected_changes * (prompt_tokens + tool_tokens) * (1 + ratio)
    return Payoff(saving=round(saving, 1), cost=round(cost, 1))


def cache_ratio(input_cost: float, cached_cost: float) -> float:
    """Cached input price over input price; 1 when the model has no price (nothing is discounted)."""
    if input_cost <= 0:
        return 1.0
    return min(1.0, max(0.0, cached_cost / input_cost))
