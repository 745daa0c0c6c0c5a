"""The continued summary request: the sent request cut after the range, chosen only when it costs less."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from gateway.assembly.compaction_layout import apply_checkpoint
from gateway.assembly.compaction_policy import CompactionPolicy
from gateway.assembly.context import Checkpoint, Context, Message, SentPrefix
from gateway.assembly.prefix import track_prefix
from gateway.assembly.sent_prefix import sent_prefix
from gateway.assembly.summarize_range import summarize_range
from gateway.summarize.continued import continued_body, continues, summarised_range
from gateway.summarize.extractive import ExtractiveSummarizer
from gateway.summarize.prompt import FACT_RULES
from gateway.tokens import counter_for
from tests.assembly.compaction_helpers import conversation, policy, run_turns
from tests.assembly.make_context import make_context

COUNTER = counter_for("o200k_base")
TOOLS = [
    {"type": "function", "function": {"name": f"tool_{i}", "description": f"Tool number {i} of the repository"}}
    for i in range(8)
]


def _history(rounds: int) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "You are a coding agent in /repo. " * 20},
        {"role": "user", "content": "Fix the lexer crash on empty input in parser/lexer.py."},
    ]
    for k in range(rounds):
        call = {"id": f"call_{k}", "type": "function", "function": {"name": "tool_1", "arguments": "{}"}}
        messages.append({"role": "assistant", "content": None, "tool_calls": [call]})
        lines = "\n".join(f"line {n}: offset 0x{k:02x}{n:04x} in parser/lexer_{k}.py" for n in range(20))
        messages.append({"role": "tool", "tool_call_id": f"call_{k}", "content": lines})
    return messages


def _sent(messages: list[dict[str, Any]], *, held: bool = True) -> Context:
    """The request as forwarded; ``held``: the provider received the same request before (its keys kept)."""
    ctx = make_context(
        {"model": "gpt-4o-mini", "messages": messages, "tools": TOOLS, "prompt_cache_key": "ventana-k"},
        context_window=32_000,
    )
    return ctx.replace(session=replace(ctx.session, previous_prefix=track_prefix(ctx).keys())) if held else ctx


class FakeModel:
    """A summariser that shares the session's cache; it answers with the extractive summary (no fact lost)."""

    name = "llm:fake"

    def __init__(self, shares_cache: bool = True, fails: bool = False) -> None:
        self.shares_cache = shares_cache
        self.fails = fails
        self.calls: list[tuple[str, int]] = []
        self.sent: list[SentPrefix] = []
        self._extractive = ExtractiveSummarizer(COUNTER)

    def __call__(self, messages: tuple[Message, ...], previous: str | None, max_tokens: int) -> str:
        self.calls.append(("compact", len(messages)))
        return self._extractive(messages, previous, max_tokens)

    def continued(self, sent: SentPrefix, messages: tuple[Message, ...], previous: str | None, max_tokens: int) -> str:
        self.calls.append(("continued", len(messages)))
        self.sent.append(sent)
        if self.fails:
            raise RuntimeError("upstream 500")
        return self._extractive(messages, previous, max_tokens)


POLICY = CompactionPolicy(summary_max_tokens=300, summarizer_input_tokens=900)


def test_the_sent_request_is_cut_after_the_range_with_its_tools_and_cache_key() -> None:
    messages = _history(12)
    sent = sent_prefix(_sent(messages), messages, 2, 18, None)
    assert sent is not None
    assert sent.messages == tuple(messages[:18]) and sent.first == 2
    assert sent.params == {"prompt_cache_key": "ventana-k"}
    assert sent.cached > 0.9 * COUNTER.request(messages[:18], TOOLS)
    body = continued_body(sent, 300)
    assert body["messages"][:-1] == messages[:18] and body["tools"] == TOOLS and body["tool_choice"] == "none"
    assert summarised_range(body["messages"]) == (2, 17)
    assert FACT_RULES in body["messages"][-1]["content"], "the summariser's rules are the compact request's"


def test_an_earlier_summary_sent_in_place_of_its_range_is_part_of_the_cut() -> None:
    messages = _history(12)
    earlier = Checkpoint("h", 2, 8, "- lexer crash at offset 0x01", "llm:fake")
    forwarded = list(apply_checkpoint(messages, earlier))
    sent = sent_prefix(_sent(forwarded), messages, 2, 18, earlier)
    assert sent is not None
    assert sent.messages == tuple(forwarded[: 2 + 1 + (18 - 8)])
    assert str(sent.messages[2]["content"]).startswith("<summary")


def test_a_range_the_gateway_rewrote_is_not_continued() -> None:
    messages = _history(12)
    cleared = [*messages[:5], {**messages[5], "content": "[result cleared]"}, *messages[6:]]
    assert sent_prefix(_sent(cleared), messages, 2, 18, None) is None


def test_continuing_is_chosen_only_when_it_costs_less() -> None:
    messages = _history(12)
    spans = [tuple(messages[2:10]), tuple(messages[10:18])]
    held = sent_prefix(_sent(messages), messages, 2, 18, None)
    cold = sent_prefix(_sent(messages, held=False), messages, 2, 18, None)
    assert held is not None and cold is not None and cold.cached == 0
    assert continues(held, spans, None, 300, COUNTER)
    assert not continues(cold, spans, None, 300, COUNTER), "uncached, the whole prefix costs more than the range"
    assert not continues(replace(held, window=held.cached), spans, None, 300, COUNTER), "over the window"
    assert not continues(replace(held, cache_ratio=1.0), spans, None, 300, COUNTER), "no cache discount"


@pytest.mark.parametrize("shares", [True, False])
def test_a_model_sharing_the_cache_summarises_the_range_in_one_continued_call(shares: bool) -> None:
    messages = _history(12)
    model = FakeModel(shares_cache=shares)
    sent = sent_prefix(_sent(messages), messages, 2, 18, None)
    result = summarize_range(messages, 2, 18, None, model, POLICY, COUNTER, sent=sent)
    if shares:
        assert model.calls == [("continued", 16)]
    else:
        assert len(model.calls) > 1 and {kind for kind, _ in model.calls} == {"compact"}
    assert result.failures == () and result.checkpoint.summarizer == "llm:fake"


def test_a_failed_continued_call_falls_back_to_the_extractive_summary() -> None:
    messages = _history(12)
    model = FakeModel(fails=True)
    sent = sent_prefix(_sent(messages), messages, 2, 18, None)
    result = summarize_range(messages, 2, 18, None, model, POLICY, COUNTER, sent=sent)
    assert model.calls == [("continued", 16)]
    assert result.checkpoint.summarizer == "extractive" and "upstream 500" in result.failures[0]
    assert result.checkpoint.summary


def test_a_summary_made_in_the_pass_continues_the_previous_request() -> None:
    """No summary prepared ahead: the turn that crosses the threshold asks the model to continue the
    request the provider received last turn (its messages and tools as forwarded), and compacts with it."""
    model = FakeModel()
    histories = [conversation(k, result_words=150) for k in range(1, 20)]
    results = run_turns(histories, policy(strategies=["summarize"]), window=8000, summarizer=model, tools=TOOLS)
    crossed = next(k for k, r in enumerate(results) if any(d.action == "compacted" for d in r.decisions))
    assert model.calls and model.calls[0][0] == "continued"
    sent = model.sent[0]
    before = results[crossed - 1].assembled
    assert sent.messages == before.messages[: len(sent.messages)] and sent.tools == before.tools
    compacted = next(d for d in results[crossed].decisions if d.action == "compacted")
    assert compacted.detail["summarizer"] == "llm:fake" and compacted.detail["summarizer_calls"] == 1
