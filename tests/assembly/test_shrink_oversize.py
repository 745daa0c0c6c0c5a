"""shrink_oversize: the capsule's strategy by size and question, the call cap, the clear 400."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gateway.assembly.context import Message
from gateway.assembly.pipeline import PASSES, assemble
from gateway.assembly.policy import Policy
from gateway.assembly.shrink_oversize import OversizePolicy, shrink_oversize
from gateway.assembly.verify_assembly import verify_assembly
from gateway.errors import ContextTooLong
from tests.assembly.make_context import make_context
from tests.long_contract import CLAUSE, QUESTION, long_contract

SYSTEM = {"role": "system", "content": "You review supply contracts for the legal team."}


class TruncatingSummarizer:
    """A deterministic stand-in for a model summariser: keeps the opening of what it is given."""

    name = "truncating"

    def __init__(self, fail: bool = False) -> None:
        self.calls = 0
        self.fail = fail

    def __call__(self, messages: Sequence[Message], previous: str | None, max_tokens: int) -> str:
        self.calls += 1
        if self.fail:
            raise RuntimeError("summariser unavailable")
        return str(messages[-1]["content"])[: max_tokens * 3]


def _ctx(text: str, question: str, *, window: int = 8_000, summarizer: Any = None) -> Any:
    body = {"messages": [SYSTEM, {"role": "user", "content": f"Here is the contract.\n\n{text}\n\n{question}"}]}
    return make_context(body, context_window=window, summarizer=summarizer)


def test_a_prompt_under_the_direct_fraction_is_left_alone() -> None:
    ctx = _ctx(long_contract(4_000), QUESTION)
    assert ctx.prompt_tokens() < 0.8 * 8_000
    assert shrink_oversize(ctx, OversizePolicy()) == (ctx, [])


def test_a_300k_token_contract_keeps_the_asked_clause_within_the_window() -> None:
    ctx = _ctx(long_contract(300_000), QUESTION, window=128_000)
    assert ctx.prompt_tokens() > 290_000
    out, [decision] = shrink_oversize(ctx, OversizePolicy())
    content = out.messages[-1]["content"]
    assert decision.detail["strategy"] == "chunk_and_extract"
    assert decision.detail["summarizer_calls"] == 0
    assert CLAUSE in content
    assert content.startswith("<condensed") and content.rstrip().endswith(QUESTION + "\n</condensed>")
    assert out.prompt_tokens() <= 0.8 * 128_000
    assert decision.tokens_before - decision.tokens_after > 190_000
    assert verify_assembly(ctx, out, [decision]) == []


def test_the_clause_survives_a_small_window_too() -> None:
    ctx = _ctx(long_contract(60_000), QUESTION, window=8_000)
    out, [decision] = shrink_oversize(ctx, OversizePolicy(edge_tokens=64))
    assert decision.detail["strategy"] == "chunk_and_extract"
    assert CLAUSE in out.messages[-1]["content"]
    assert out.prompt_tokens() <= 6_400


def test_summary_request_slightly_over_uses_a_chain_of_summariser_calls() -> None:
    summarizer = TruncatingSummarizer()
    ctx = _ctx(long_contract(14_000), "Summarise the contract for the board.", summarizer=summarizer)
    out, [decision] = shrink_oversize(ctx, OversizePolicy(summary_chunk_tokens=4_000))
    assert decision.detail["strategy"] == "summarization_chain"
    assert decision.detail["summarizer"] == "truncating"
    assert decision.detail["summarizer_calls"] == summarizer.calls >= 3
    assert out.prompt_tokens() <= 6_400
    assert verify_assembly(ctx, out, [decision]) == []


def test_far_larger_summary_requests_go_hierarchical_within_the_call_cap() -> None:
    summarizer = TruncatingSummarizer()
    ctx = _ctx(long_contract(60_000), "Summarise the contract for the board.", summarizer=summarizer)
    policy = OversizePolicy(summary_chunk_tokens=4_000, max_summarizer_calls=40)
    out, [decision] = shrink_oversize(ctx, policy)
    assert decision.detail["strategy"] == "hierarchical_summarization"
    assert decision.detail["summarizer_calls"] == summarizer.calls <= 40
    assert out.prompt_tokens() <= 6_400


def test_without_a_summariser_the_summary_is_extractive_and_free() -> None:
    ctx = _ctx(long_contract(14_000), "Summarise the contract for the board.")
    out, [decision] = shrink_oversize(ctx, OversizePolicy())
    assert decision.detail["summarizer"] == "extractive"
    assert decision.detail["summarizer_calls"] == 0
    assert out.prompt_tokens() <= 6_400
    assert "Clause" in out.messages[-1]["content"]


def test_a_failing_summariser_falls_back_to_extractive_and_says_so() -> None:
    summarizer = TruncatingSummarizer(fail=True)
    ctx = _ctx(long_contract(14_000), "Summarise the contract for the board.", summarizer=summarizer)
    out, [decision] = shrink_oversize(ctx, OversizePolicy(summary_chunk_tokens=4_000))
    assert decision.detail["summarizer_failures"] == summarizer.calls > 0
    assert out.prompt_tokens() <= 6_400


def test_past_the_call_cap_the_client_gets_a_400_with_tokens_and_limit() -> None:
    ctx = _ctx(long_contract(300_000), "Summarise the contract.", window=128_000, summarizer=TruncatingSummarizer())
    with pytest.raises(ContextTooLong) as info:
        shrink_oversize(ctx, OversizePolicy(max_summarizer_calls=2))
    message = info.value.message
    assert info.value.status_code == 400 and info.value.code == "context_length_exceeded"
    assert str(ctx.prompt_tokens()) in message and "128000" in message and "cap is 2" in message


def test_when_the_rest_of_the_prompt_leaves_no_room_it_is_a_400() -> None:
    big_system = {"role": "system", "content": long_contract(7_000)}
    body = {"messages": [big_system, {"role": "user", "content": long_contract(5_000, seed=3) + "\n" + QUESTION}]}
    ctx = make_context(body, context_window=8_000)
    with pytest.raises(ContextTooLong) as info:
        shrink_oversize(ctx, OversizePolicy())
    assert f"{ctx.prompt_tokens()} prompt tokens" in info.value.message
    assert "at most 8000" in info.value.message


def test_a_request_the_provider_would_still_accept_is_never_refused() -> None:
    body = {"messages": [{"role": "system", "content": long_contract(6_600)}, {"role": "user", "content": QUESTION}]}
    ctx = make_context(body, context_window=8_000)
    assert 6_400 < ctx.prompt_tokens() <= 8_000
    assert shrink_oversize(ctx, OversizePolicy()) == (ctx, [])


def test_an_oversize_tool_result_is_shrunk_in_place_and_stays_paired() -> None:
    call = {"id": "call_1", "type": "function", "function": {"name": "fetch_contract", "arguments": "{}"}}
    messages = [
        SYSTEM,
        {"role": "user", "content": QUESTION},
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "call_1", "content": long_contract(30_000)},
    ]
    ctx = make_context({"messages": messages}, context_window=8_000)
    out, [decision] = shrink_oversize(ctx, OversizePolicy())
    shrunk = out.messages[3]
    assert shrunk["role"] == "tool" and shrunk["tool_call_id"] == "call_1"
    assert decision.detail["strategy"] == "chunk_and_extract" and decision.detail["shrunk_message"] == 3
    assert CLAUSE in shrunk["content"]
    assert verify_assembly(ctx, out, [decision]) == []
    assert out.messages[:3] == ctx.messages[:3]


def test_the_pipeline_is_stable_and_passes_its_safety_check() -> None:
    ctx = _ctx(long_contract(30_000), QUESTION)
    once = assemble(ctx, Policy(), PASSES)
    twice = assemble(once.assembled, Policy(), PASSES)
    assert not once.reverted
    assert [d.pass_name for d in once.decisions] == ["shrink_oversize"]
    assert twice.assembled.messages == once.assembled.messages


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    window=st.integers(2_000, 12_000),
    factor=st.floats(0.2, 12.0),
    question=st.sampled_from([QUESTION, "Summarise the contract for the board.", "Resume el contrato."]),
    with_summarizer=st.booleans(),
)
def test_shrunk_requests_fit_or_are_refused(window: int, factor: float, question: str, with_summarizer: bool) -> None:
    summarizer = TruncatingSummarizer() if with_summarizer else None
    ctx = _ctx(long_contract(int(window * factor)), question, window=window, summarizer=summarizer)
    policy = OversizePolicy(summary_chunk_tokens=2_000)
    try:
        out, decisions = shrink_oversize(ctx, policy)
    except ContextTooLong:
        assert ctx.prompt_tokens() > window, "refused a request the provider would have accepted"
        return
    if not decisions:
        assert out is ctx and ctx.prompt_tokens() <= window
        return
    assert out.prompt_tokens() <= 0.8 * window
    assert verify_assembly(ctx, out, decisions) == []
    assert decisions[0].detail["summarizer_calls"] <= policy.max_summarizer_calls
    assert out.messages[-1]["content"].rstrip().endswith(question + "\n</condensed>")
