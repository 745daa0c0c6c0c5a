"""Who summarises: the named model, else the session's own model when it has a key, else the rules."""

from __future__ import annotations

from typing import Any

import pytest

from gateway.config import Settings
from gateway.summarize.choice import summarizer_model

MODELS = [
    {"name": "keyed", "litellm_model": "openai/gpt-4o-mini", "api_key_env": "VENTANA_TEST_SUMMARY_KEY"},
    {"name": "local", "litellm_model": "openai/gpt-4o-mini", "api_base": "http://127.0.0.1:9/v1"},
]


def _settings(**compaction: Any) -> Settings:
    return Settings.model_validate({"models": MODELS, "policy": {"compaction": compaction}})


def _pick(settings: Settings, session_model: str) -> str | None:
    chosen = summarizer_model(settings, settings.model(session_model))
    return chosen.name if chosen is not None else None


def test_session_model_summarises_when_its_provider_key_is_set(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("VENTANA_TEST_SUMMARY_KEY", "sk-real")
    assert _pick(_settings(), "keyed") == "keyed"


def test_no_provider_key_means_extractive(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("VENTANA_TEST_SUMMARY_KEY", raising=False)
    assert _pick(_settings(), "keyed") is None
    assert _pick(_settings(), "local") is None, "a keyless local provider (the simulator) is not a summariser"


def test_named_summarizer_model_wins_even_without_a_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("VENTANA_TEST_SUMMARY_KEY", "sk-real")
    assert _pick(_settings(summarizer_model="local"), "keyed") == "local"


def test_session_model_can_be_switched_off(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("VENTANA_TEST_SUMMARY_KEY", "sk-real")
    assert _pick(_settings(summarize_with_session_model=False), "keyed") is None


def test_no_model_when_summaries_are_off(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("VENTANA_TEST_SUMMARY_KEY", "sk-real")
    assert _pick(_settings(strategies=["clear_tool_results"]), "keyed") is None
    assert _pick(_settings(enabled=False), "keyed") is None
