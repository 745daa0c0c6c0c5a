"""attach_documents: case files (input/expected pairs) plus the properties every run must keep."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gateway.assembly.attach_documents import DocumentPolicy, attach_documents
from gateway.assembly.context import Context, Decision
from gateway.assembly.pipeline import PASSES, assemble
from gateway.assembly.policy import Policy
from gateway.assembly.verify_assembly import verify_assembly
from gateway.errors import RequestError
from tests.assembly.make_context import make_context

CASES = sorted((Path(__file__).parent / "cases" / "attach_documents").glob("*.json"))
_SOURCE = re.compile(r'<document source="([^"]*)"')


def _run(case: dict[str, Any]) -> tuple[Context, Context, list[Decision]]:
    ctx = make_context(case["request"], now=case["now"], context_window=case["context_window"])
    out, decisions = attach_documents(ctx, DocumentPolicy(**case["policy"]))
    return ctx, out, decisions


@pytest.mark.parametrize("path", CASES, ids=[p.stem for p in CASES])
def test_case(path: Path) -> None:
    case = json.loads(path.read_text())
    ctx, out, decisions = _run(case)
    expected = case["expected"]
    got = [{"action": d.action, "source": d.detail["source"], "why": d.detail["why"]} for d in decisions]
    assert got == [{k: e[k] for k in ("action", "source", "why")} for e in expected["decisions"]]
    for d, e in zip(decisions, expected["decisions"], strict=True):
        assert e.get("reason_contains", "") in d.reason
        if "parts" in e:
            assert d.detail["parts"] == e["parts"]
        assert d.tokens_before == 0 and (d.tokens_after > 0) == (d.action != "dropped")
    if expected.get("unchanged"):
        assert out is ctx
        return
    assert verify_assembly(ctx, out, decisions) == []
    block = out.messages[-2]["content"]
    assert out.messages[-1] == ctx.messages[-1], "the question must stay last"
    assert out.messages[:-2] == ctx.messages[:-1]
    assert block.startswith("<documents")
    if "block_sources" in expected:
        assert _SOURCE.findall(block) == expected["block_sources"]
    for text in expected.get("block_contains", []):
        assert text in block
    for text in expected.get("block_excludes", []):
        assert text not in block
    for text, n in expected.get("block_counts", {}).items():
        assert block.count(text) == n
    room = decisions[0].detail["room"]
    added = out.prompt_tokens() - ctx.prompt_tokens()
    assert added <= room + ctx.env.counter.message({"role": "user", "content": "<documents></documents>"})


def test_article_example_fits_the_whole_prompt_budget() -> None:
    case = json.loads(
        (Path(__file__).parent / "cases" / "attach_documents" / "article_price_assistant.json").read_text()
    )
    _, out, _ = _run(case)
    assert out.prompt_tokens() <= case["request"]["document_policy"]["budget_tokens"]


def _body(documents: Any, **extra: Any) -> dict[str, Any]:
    return {
        "model": "gpt-4o-mini",
        "messages": [{"role": "user", "content": "What is the refund window at Acme?"}],
        "documents": documents,
        **extra,
    }


def test_without_documents_nothing_changes() -> None:
    ctx = make_context({"messages": [{"role": "user", "content": "hi"}]})
    assert attach_documents(ctx, DocumentPolicy()) == (ctx, [])


@pytest.mark.parametrize(
    ("documents", "param"),
    [
        ({"text": "x"}, "documents"),
        ([{"text": "x", "source": "s"}], "documents[0].fetched_at"),
        ([{"text": "x", "source": "s", "fetched_at": "yesterday"}], "documents[0].fetched_at"),
        ([{"text": 3, "source": "s", "fetched_at": "2026-01-01"}], "documents[0].text"),
        ([{"text": "x", "source": "", "fetched_at": "2026-01-01"}], "documents[0].source"),
        ([{"text": "x", "source": "s", "fetched_at": "2026-01-01", "score": "high"}], "documents[0].score"),
    ],
)
def test_malformed_documents_name_the_field(documents: Any, param: str) -> None:
    ctx = make_context(_body(documents))
    with pytest.raises(RequestError) as info:
        attach_documents(ctx, DocumentPolicy())
    assert info.value.param == param
    assert info.value.status_code == 400


def test_bad_policy_override_is_a_400_naming_the_key() -> None:
    docs = [{"text": "Refunds within 30 days.", "source": "s", "fetched_at": "2026-09-01"}]
    ctx = make_context(_body(docs, document_policy={"min_score": "lots"}))
    with pytest.raises(RequestError) as info:
        attach_documents(ctx, DocumentPolicy())
    assert info.value.param == "document_policy.min_score"


def test_policy_override_can_switch_documents_off_for_one_call() -> None:
    docs = [{"text": "Acme refund window is 30 days.", "source": "s", "fetched_at": "2026-09-01"}]
    ctx = make_context(_body(docs, document_policy={"enabled": False}))
    assert attach_documents(ctx, DocumentPolicy()) == (ctx, [])


def test_epoch_seconds_and_future_dates_count_as_fresh() -> None:
    docs = [
        {"text": "Acme refund window is 30 days.", "source": "a", "fetched_at": 1_790_000_000},
        {"text": "Acme refund window is thirty days from delivery.", "source": "b", "fetched_at": "2027-01-01"},
    ]
    ctx = make_context(_body(docs, document_policy={"max_age_days": 1}), now="2026-09-23T12:00:00Z")
    _, decisions = attach_documents(ctx, DocumentPolicy())
    assert [d.detail["why"] for d in decisions] == ["relevant", "relevant"]


def test_running_the_pipeline_twice_changes_nothing() -> None:
    case = json.loads(
        (Path(__file__).parent / "cases" / "attach_documents" / "article_price_assistant.json").read_text()
    )
    ctx = make_context(case["request"], now=case["now"])
    policy = Policy(attach_documents=DocumentPolicy(**case["policy"]))
    once = assemble(ctx, policy, PASSES)
    twice = assemble(once.assembled, policy, PASSES)
    assert not once.reverted
    assert twice.assembled.messages == once.assembled.messages


_WORDS = ["acme", "refund", "window", "days", "delivery", "shipping", "gift", "card", "router", "reset", "price"]


@st.composite
def _documents(draw: st.DrawFn) -> list[dict[str, Any]]:
    n = draw(st.integers(0, 7))
    docs = []
    for _ in range(n):
        words = draw(st.lists(st.sampled_from(_WORDS), min_size=1, max_size=400))
        day = draw(st.integers(1, 28))
        doc: dict[str, Any] = {
            "text": " ".join(words) + draw(st.sampled_from(["", " </documents> <x>", " & ok."])),
            "source": draw(st.sampled_from(["a", "b", "c", "d"])),
            "fetched_at": f"2026-09-{day:02d}",
        }
        if draw(st.booleans()):
            doc["score"] = draw(st.floats(0, 1))
        docs.append(doc)
    return docs


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(docs=_documents(), budget=st.integers(60, 2_000), max_age=st.one_of(st.none(), st.integers(0, 30)))
def test_properties_hold_for_any_documents(docs: list[dict[str, Any]], budget: int, max_age: int | None) -> None:
    body = _body(docs, document_policy={"budget_tokens": budget, "max_age_days": max_age})
    ctx = make_context(body, now="2026-09-28T00:00:00Z")
    out, decisions = attach_documents(ctx, DocumentPolicy(chunk_tokens=64, chunk_overlap=8))
    assert len(decisions) == len(docs), "one decision per document"
    assert {d.action for d in decisions} <= {"kept", "chunked", "dropped"}
    kept = [d for d in decisions if d.action != "dropped"]
    if not kept:
        assert out is ctx
        return
    assert verify_assembly(ctx, out, decisions) == []
    assert out.messages[-1] == ctx.messages[-1]
    assert out.prompt_tokens() <= max(budget, ctx.prompt_tokens())
    block = out.messages[-2]["content"]
    assert block.count("</documents>") == 1 and block.count("</document>") == len(_SOURCE.findall(block))
    sources = [d.detail["source"] for d in kept]
    assert len(sources) == len(set(sources)), "only the newest copy of a source is kept"
    if max_age is not None:
        assert all(28 - int(d.detail["fetched_at"][-2:]) <= max_age for d in kept), "a stale document was kept"


def test_block_goes_before_the_question_even_when_tool_results_follow_it() -> None:
    call = {"id": "call_9", "type": "function", "function": {"name": "lookup_order", "arguments": "{}"}}
    messages = [
        {"role": "user", "content": "What is the refund window for my Acme order?"},
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "call_9", "content": "order 17 delivered 2026-09-20"},
    ]
    docs = [{"text": "Acme refund window: 30 days from delivery.", "source": "acme", "fetched_at": "2026-09-22"}]
    ctx = make_context({"messages": messages, "documents": docs})
    out, [decision] = attach_documents(ctx, DocumentPolicy())
    assert decision.action == "kept"
    assert out.messages[0]["content"].startswith("<documents") and out.messages[1:] == ctx.messages
    assert verify_assembly(ctx, out, [decision]) == []
