"""Fact extraction by the summariser model: parsing, and falling back to the rules (real HTTP)."""

from __future__ import annotations

import pytest

from gateway.assembly.memory_blocks import Fact
from gateway.config import ModelConfig, parse_settings
from gateway.errors import ConfigError
from gateway.memory.llm_facts import FACT_PROMPT, LLMFactExtractor, parse_fact_lines
from tests.procs import SimHandle, free_port


def test_only_slot_bar_fact_lines_are_read_and_the_last_per_slot_wins() -> None:
    text = (
        "Here you go:\n- name | Their name is Ana.\nuses:postgresql | The project uses PostgreSQL 16.\n"
        "user: I prefer Go | maybe\nuses:postgresql | The project uses PostgreSQL 17.\nNot a fact line"
    )
    assert parse_fact_lines(text) == [
        Fact("name", "Their name is Ana."),
        Fact("uses:postgresql", "The project uses PostgreSQL 17."),
    ]


def _model(base_url: str) -> ModelConfig:
    return ModelConfig(name="facts", litellm_model="openai/gpt-4o-mini", api_base=base_url)


def test_a_model_answer_without_fact_lines_leaves_the_rules_facts(sim: SimHandle) -> None:
    sim.reset()
    extract = LLMFactExtractor(model=_model(sim.base_url), api_key=None, timeout_s=10)
    try:
        facts = extract(["I prefer TypeScript. The project uses PostgreSQL 16."])
    finally:
        extract.close()
    assert {f.slot for f in facts} == {"prefers", "uses:postgresql"}
    (asked,) = sim.received()
    assert asked["messages"][0]["content"] == FACT_PROMPT
    assert "user: I prefer TypeScript." in asked["messages"][1]["content"]


def test_an_unreachable_model_falls_back_to_the_rules() -> None:
    extract = LLMFactExtractor(model=_model(f"http://127.0.0.1:{free_port()}/v1"), api_key=None, timeout_s=2)
    try:
        assert extract(["My name is Ana."]) == [Fact("name", "Their name is Ana.")]
    finally:
        extract.close()


def test_extract_with_summarizer_needs_a_summarizer_model() -> None:
    with pytest.raises(ConfigError, match=r"policy\.compaction\.summarizer_model names no model"):
        parse_settings({"policy": {"memory": {"enabled": True, "extract_with": "summarizer"}}})
