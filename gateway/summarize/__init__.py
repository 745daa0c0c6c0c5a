"""Summarisers for history compaction: extractive (pure, deterministic) and LLM (does I/O).

Both satisfy ``gateway.assembly.context.Summarizer``: ``(messages, previous, max_tokens) -> str``.
The compaction pass only ever sees that protocol; the LLM one is injected through ``Env``.
"""

from __future__ import annotations

from gateway.summarize.choice import summarizer_model
from gateway.summarize.extractive import ExtractiveSummarizer
from gateway.summarize.facts import extract_facts, missing_facts
from gateway.summarize.llm import LLMSummarizer
from gateway.summarize.salience import salient_facts, template_ids
from gateway.summarize.transcript import render_transcript, transcript_lines

__all__ = [
    "ExtractiveSummarizer",
    "LLMSummarizer",
    "extract_facts",
    "missing_facts",
    "render_transcript",
    "salient_facts",
    "summarizer_model",
    "template_ids",
    "transcript_lines",
]
