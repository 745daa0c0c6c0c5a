"""Findings: the provider key reached the store and the logs when a summariser call failed with an
error that echoes it (the main path scrubbed it); and ``extract_with: summarizer`` raised TypeError
on any summariser error (``error_for_status`` called wrongly), losing the rules' facts too."""

from __future__ import annotations

import logging

import pytest

from gateway.config import ModelConfig
from gateway.errors import UpstreamError
from gateway.memory.extract_facts import extract_facts
from gateway.memory.llm_facts import LLMFactExtractor
from gateway.summarize.llm import LLMSummarizer
from tests.procs import SimHandle

KEY = "sk-summariser-secret-0123456789abcdef"


def _model(sim: SimHandle) -> ModelConfig:
    return ModelConfig(name="summarizer", litellm_model="openai/gpt-4o-mini", api_base=sim.base_url)


def test_a_summariser_error_that_quotes_the_key_does_not_carry_it(sim: SimHandle) -> None:
    sim.faults({"kind": "echo_key", "times": 1})
    summarizer = LLMSummarizer(model=_model(sim), api_key=KEY, timeout_s=10)
    with pytest.raises(UpstreamError) as caught:
        summarizer(({"role": "user", "content": "hello"},), None, 50)
    assert "Incorrect API key" in caught.value.message
    assert KEY not in caught.value.message and KEY not in str(caught.value)


@pytest.mark.parametrize("fault", [{"kind": "echo_key"}, {"kind": "status", "status": 500}])
def test_the_fact_extractor_survives_a_failed_call_with_the_rules_facts_and_no_key(
    sim: SimHandle, caplog: pytest.LogCaptureFixture, fault: dict[str, object]
) -> None:
    sim.faults({**fault, "times": 3})
    extractor = LLMFactExtractor(model=_model(sim), api_key=KEY, timeout_s=10)
    with caplog.at_level(logging.WARNING, logger="ventana.memory"):
        facts = extractor(["I prefer TypeScript."])
    assert facts and facts == extract_facts(["I prefer TypeScript."]), "the rules' facts are kept"
    assert "fact extraction by summarizer failed" in caplog.text and KEY not in caplog.text
    sim.reset()
