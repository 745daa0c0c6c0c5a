"""Calibration: learn provider prompt_tokens / gateway count per model and report what is left."""

from __future__ import annotations

import random

from gateway.calibration import MIN_SAMPLES, Calibration


def test_learns_the_ratio_and_reports_a_small_residual() -> None:
    rng = random.Random(7)
    cal = Calibration()
    for _ in range(100):
        counted = rng.randint(200, 5000)
        cal.observe("claude", counted, round(counted * 1.17 * rng.uniform(0.98, 1.02)))
    stats = cal.stats("claude")
    assert abs(stats.ratio - 1.17) < 0.01
    assert stats.residual_error < 0.02
    assert cal.correct("claude", 1000) in range(1160, 1181)


def test_one_outlier_does_not_move_the_median() -> None:
    cal = Calibration()
    for counted in (100, 200, 300, 400):
        cal.observe("m", counted, counted)
    cal.observe("m", 100, 900)
    assert cal.ratio("m") == 1.0


def test_no_correction_before_enough_samples_or_for_openai_models() -> None:
    cal = Calibration()
    for _ in range(MIN_SAMPLES - 1):
        cal.observe("claude", 100, 150)
    assert cal.ratio("claude") == 1.0
    cal.observe("claude", 100, 150)
    assert cal.ratio("claude") == 1.5
    assert cal.scale_for("claude", "anthropic/claude-3-5-sonnet") == 1.5
    for _ in range(5):
        cal.observe("gpt", 100, 150)
    assert cal.scale_for("gpt", "openai/gpt-4o-mini") == 1.0


def test_ignores_requests_without_counts() -> None:
    cal = Calibration()
    cal.observe("m", 0, 100)
    cal.observe("m", 100, 0)
    assert cal.report() == []
