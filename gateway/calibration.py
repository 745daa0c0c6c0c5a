"""Learn, per model, how far the gateway's token count is from what the provider bills.

The gateway counts with tiktoken. For OpenAI models that is the provider's own
tokenizer and the ratio stays at 1.0; for Claude, Gemini or open models it is an
approximation. Every answered request gives one sample: the provider's
``prompt_tokens`` divided by the gateway's count of the same assembled request. The
correction is the median of the recent samples (robust to one odd request), and the
residual error is the median relative error left after applying it, so a budget knows
how much to trust itself.
"""

from __future__ import annotations

import statistics
from collections import deque
from dataclasses import dataclass
from typing import Any

from gateway.tokens import is_openai_model

DEFAULT_WINDOW = 200
MIN_SAMPLES = 3


@dataclass(frozen=True, slots=True)
class CalibrationStats:
    model: str
    samples: int
    ratio: float
    residual_error: float

    def to_dict(self) -> dict[str, Any]:
        return {
            "model": self.model,
            "samples": self.samples,
            "ratio": round(self.ratio, 4),
            "residual_error": round(self.residual_error, 4),
        }


class Calibration:
    """Per-model ratios of provider ``prompt_tokens`` to the gateway's count, over a sliding window.

    Not thread-safe: one instance per event loop (each gateway worker has its own).
    """

    def __init__(self, *, window: int = DEFAULT_WINDOW) -> None:
        self._window = window
        self._ratios: dict[str, deque[float]] = {}
        self._observed: dict[str, int] = {}
        # model -> (observations when computed, stats): two medians over the window cost ~40 us,
        # and every request asks; a full window moves little in a few samples.
        self._memo: dict[str, tuple[int, CalibrationStats]] = {}

    def observe(self, model: str, counted: int, reported: int) -> None:
        """Record one request the gateway counted as ``counted`` and the provider billed as ``reported``."""
        if counted <= 0 or reported <= 0:
            return
        self._ratios.setdefault(model, deque(maxlen=self._window)).append(reported / counted)
        self._observed[model] = self._observed.get(model, 0) + 1

    def ratio(self, model: str) -> float:
        """The correction to multiply counts by; 1.0 until ``MIN_SAMPLES`` answers were seen."""
        return self.stats(model).ratio

    def _ratio(self, samples: deque[float] | None) -> float:
        if not samples or len(samples) < MIN_SAMPLES:
            return 1.0
        return statistics.median(samples)

    def scale_for(self, model: str, litellm_model: str) -> float:
        """The ratio budgets use: 1.0 for models tiktoken counts exactly, the learned one otherwise."""
        return 1.0 if is_openai_model(litellm_model) else self.ratio(model)

    def correct(self, model: str, counted: int) -> int:
        return round(counted * self.ratio(model))

    def stats(self, model: str) -> CalibrationStats:
        """Ratio and residual error; recomputed once per 1/16 of the window's samples renewed."""
        observed = self._observed.get(model, 0)
        found = self._memo.get(model)
        samples = self._ratios.get(model)
        if found is not None and observed - found[0] < max(1, len(samples or ()) // 16):
            return found[1]
        ratio = self._ratio(samples)
        residual = statistics.median(abs(r / ratio - 1.0) for r in samples) if samples else 0.0
        computed = CalibrationStats(model, len(samples or ()), ratio, residual)
        self._memo[model] = (observed, computed)
        return computed

    def report(self) -> list[CalibrationStats]:
        return [self.stats(model) for model in sorted(self._ratios)]
