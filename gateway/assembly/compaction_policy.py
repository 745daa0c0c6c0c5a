"""``policy.compaction``: when history is compacted, what is kept, and how it is summarised.

One block configures both compaction passes (``clear_tool_results`` at slot 4 and
``compact_history`` at slot 5): ``strategies`` switches them on; clearing, the cheaper, always runs first.
Thresholds are shares of the model's context window and appear in every decision.

Three watermarks, all shares of the window: crossing ``threshold`` triggers a compaction
that goes down to ``target`` (hysteresis: the next one is many rounds away and the prefix
stays byte-identical in between); ``prepare_at`` is where the next summary is prepared in
the background. ``target`` and ``prepare_at`` default relative to ``threshold`` (25/55 and
45/55 of it), so lowering the threshold alone is a valid configuration.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any, Literal

from pydantic import Field, model_validator

from gateway.assembly.pass_policy import PassPolicy
from gateway.object_memo import ObjectMemo

DEFAULT_THRESHOLD = 0.55
DEFAULT_TARGET = 0.25
DEFAULT_PREPARE_AT = 0.45
#: ``target`` and ``prepare_at`` as shares of the threshold when they are not set.
TARGET_RATIO = DEFAULT_TARGET / DEFAULT_THRESHOLD
PREPARE_RATIO = DEFAULT_PREPARE_AT / DEFAULT_THRESHOLD
DEFAULT_KEEP_RECENT_TURNS = 3
DEFAULT_KEEP_RECENT_ROUNDS = 4
DEFAULT_SUMMARY_MAX_TOKENS = 1200
DEFAULT_SUMMARIZER_INPUT_TOKENS = 6000
DEFAULT_SUMMARIZER_TIMEOUT_S = 30.0
#: An unset ``summary_max_tokens`` is at most this share of the window (and at least ``MIN_SUMMARY_TOKENS``).
SUMMARY_WINDOW_SHARE = 0.08
MIN_SUMMARY_TOKENS = 256

Strategy = Literal["clear_tool_results", "summarize"]


class CompactionPolicy(PassPolicy):
    """Settings of history compaction (see docs/compaction.md for each key's effect)."""

    threshold: float = Field(default=DEFAULT_THRESHOLD, gt=0, le=1)
    target: float = Field(default=DEFAULT_TARGET, gt=0, le=1)
    prepare_at: float = Field(default=DEFAULT_PREPARE_AT, gt=0, le=1)
    keep_recent_turns: int = Field(default=DEFAULT_KEEP_RECENT_TURNS, ge=1)
    keep_recent_rounds: int = Field(default=DEFAULT_KEEP_RECENT_ROUNDS, ge=1)
    keep_recent_tokens: int | None = Field(default=None, ge=0)
    strategies: tuple[Strategy, ...] = ("clear_tool_results", "summarize")
    never_clear: tuple[str, ...] = ()  # tool names whose results are never cleared
    keep_tool_results: int = Field(default=0, ge=0)  # the newest N tool results are never cleared (a client's keep)
    clear_tool_inputs: bool = False  # also stub the arguments of cleared calls (never of the newest rounds)
    summarizer_model: str | None = None  # a configured model name; null -> the session's model or extractive
    #: With no summarizer_model: summarise with the session's own model when it has a provider key.
    summarize_with_session_model: bool = True
    summary_max_tokens: int = Field(default=DEFAULT_SUMMARY_MAX_TOKENS, gt=0)
    summarizer_input_tokens: int = Field(default=DEFAULT_SUMMARIZER_INPUT_TOKENS, gt=0)
    summarizer_timeout_s: float = Field(default=DEFAULT_SUMMARIZER_TIMEOUT_S, gt=0)
    max_dropped_share: float = Field(default=0.5, ge=0, le=1)
    clear_min_tokens: int = Field(default=50, ge=0)
    reserve_tokens: int = Field(default=0, ge=0)  # generation reserve when the request sets no max_tokens
    reuse_checkpoints: bool = True
    max_checkpoints: int = Field(default=8, ge=1)
    prompt_cache_key: bool = True  # set OpenAI's prompt_cache_key from caller + session when the client sent none
    prompt_cache_retention: Literal["in_memory", "24h"] | None = None  # asked of OpenAI upstreams if client did not

    @model_validator(mode="before")
    @classmethod
    def _relative_defaults(cls, data: Any) -> Any:
        """Unset ``target``/``prepare_at`` follow the threshold, so ``threshold: 0.2`` alone is valid."""
        if not isinstance(data, dict) or "threshold" not in data:
            return data
        threshold = data["threshold"]
        if not isinstance(threshold, int | float):
            return data  # the field validator names the problem
        out = dict(data)
        out.setdefault("target", round(threshold * TARGET_RATIO, 4))
        out.setdefault("prepare_at", round(threshold * PREPARE_RATIO, 4))
        return out

    @model_validator(mode="after")
    def _watermarks_in_order(self) -> CompactionPolicy:
        if self.prepare_at > self.threshold:
            raise ValueError(
                f"prepare_at ({self.prepare_at}) must not exceed threshold ({self.threshold}): "
                "the summary is prepared before the threshold is crossed"
            )
        if self.target > self.threshold:
            raise ValueError(
                f"target ({self.target}) must not exceed threshold ({self.threshold}): "
                "a compaction goes from the threshold down to the target"
            )
        if self.summarizer_input_tokens <= self.summary_max_tokens:
            raise ValueError(
                f"summarizer_input_tokens ({self.summarizer_input_tokens}) must exceed summary_max_tokens "
                f"({self.summary_max_tokens}): each call folds the previous summary and a new span"
            )
        return self


def for_window(policy: CompactionPolicy, window: int) -> CompactionPolicy:
    """``policy`` for a model with this window: an unset ``summary_max_tokens`` scaled down to it.

    The default ceiling (1,200 tokens) is 15 % of an 8K window and 20 % of a 6K one: with the head a
    compaction keeps (mini-swe-agent's task alone is 1.4K tokens) it left no room below the target, so
    compactions landed high and came every few rounds (43 and 90 against bounds of 32 and 43). A
    ceiling set in the config is the operator's and is kept.
    """
    by_window = _SIZED.get_or(policy, lambda _: {})
    sized = by_window.get(window)
    if sized is None:
        sized = by_window[window] = (
            policy if "summary_max_tokens" in policy.model_fields_set else _scaled(policy, window)
        )
    return sized


#: By the policy object's identity, five times a request: ``_scaled``'s key hashes every field of a
#: pydantic model (~2-5 us a call). Policies planned per request (a client's context management) churn it.
_SIZED: ObjectMemo[dict[int, CompactionPolicy]] = ObjectMemo(limit=256)


#: Keyed by the policy's value (a policy with the ceiling set explicitly never gets here: equal
#: values, different ``model_fields_set``). Memoised: one copy per policy and window.
@lru_cache(maxsize=256)
def _scaled(policy: CompactionPolicy, window: int) -> CompactionPolicy:
    ceiling = min(DEFAULT_SUMMARY_MAX_TOKENS, max(MIN_SUMMARY_TOKENS, int(SUMMARY_WINDOW_SHARE * window)))
    if ceiling >= policy.summary_max_tokens:
        return policy
    return with_sized_ceiling(policy, ceiling)


def with_sized_ceiling(policy: CompactionPolicy, ceiling: int) -> CompactionPolicy:
    """``policy`` with the gateway's own summary ceiling: still unset as far as the config goes.

    ``model_copy(update=...)`` would mark the field as set, and a later sizing (``for_window`` again,
    ``compaction_layout.for_head``) would take the gateway's ceiling for the operator's and keep it.
    """
    fields = {**policy.__dict__, "summary_max_tokens": ceiling}
    return CompactionPolicy.model_construct(_fields_set=set(policy.model_fields_set), **fields)
