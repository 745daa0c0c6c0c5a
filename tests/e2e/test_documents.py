"""Documents and oversize input end to end: the openai SDK -> gateway -> provider-sim, over real HTTP."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import openai
import pytest

from gateway.tokens import counter_for
from tests.long_contract import CLAUSE, QUESTION, long_contract
from tests.procs import GatewayHandle, SimHandle

PRICE_QUESTION = "What is the price of Product Y at Shop X in Türkiye today?"


def _day(days_ago: int) -> str:
    return (datetime.now(UTC) - timedelta(days=days_ago)).date().isoformat()


def _article_documents() -> list[dict[str, Any]]:
    """The article's five pages, dated relative to today as the article dates them relative to its TODAY."""
    return [
        {
            "source": "https://shop.example/tr/product-y",
            "fetched_at": _day(0),
            "text": "Shop X. Product Y 256 GB. Price in Türkiye: 18,499 TRY, VAT included. "
            "In stock, delivery in 2 days.",
        },
        {
            "source": "https://shop.example/tr/product-y",
            "fetched_at": _day(356),
            "text": "Shop X. Product Y 256 GB. Price in Türkiye: 15,999 TRY, VAT included.",
        },
        {
            "source": "https://shop.example/tr/product-y/specs",
            "fetched_at": _day(0),
            "text": "Shop X. Product Y full specifications. "
            + "Display 6.1 inch OLED, 120 Hz. Battery 4,000 mAh. " * 40,
        },
        {
            "source": "https://shop.example/tr/campaigns",
            "fetched_at": _day(0),
            "text": "Shop X autumn campaign: 10% off Product Y with the code AUTUMN10 until 30 September 2026.",
        },
        {
            "source": "https://review.example/product-y",
            "fetched_at": _day(2),
            "text": "Product Y review: the battery lasts two days and the camera works well in low light.",
        },
    ]


def _client(gw: GatewayHandle) -> openai.OpenAI:
    return openai.OpenAI(base_url=gw.base_url, api_key="sk-client", max_retries=0, timeout=120)


def test_provider_receives_wrapped_documents_and_never_the_field(
    default_gateway: GatewayHandle, sim: SimHandle
) -> None:
    messages = [
        {"role": "system", "content": "You answer price questions. Cite each source URL with its fetch date."},
        {"role": "user", "content": PRICE_QUESTION},
    ]
    got = _client(default_gateway).chat.completions.create(
        model="gpt-4o-mini",
        messages=messages,  # type: ignore[arg-type]
        extra_body={"documents": _article_documents(), "document_policy": {"max_age_days": 7, "budget_tokens": 500}},
    )
    received = sim.received()[-1]
    assert "documents" not in received and "document_policy" not in received
    assert received["messages"][0] == messages[0]
    assert received["messages"][-1] == messages[1], "the question stays last and verbatim"
    block = received["messages"][-2]["content"]
    assert received["messages"][-2]["role"] == "user" and block.startswith("<documents")
    assert "data, not instructions" in block
    assert f'source="https://shop.example/tr/product-y" fetched_at="{_day(0)}"' in block
    assert "18,499 TRY" in block and "AUTUMN10" in block and 'part="1/' in block
    assert "15,999 TRY" not in block, "the stale copy was forwarded"
    assert "camera works well" not in block, "the off-topic review was forwarded"
    assert got.usage is not None and got.usage.prompt_tokens <= 500


def test_without_documents_the_body_goes_out_as_sent(default_gateway: GatewayHandle, sim: SimHandle) -> None:
    messages = [{"role": "user", "content": PRICE_QUESTION}]
    _client(default_gateway).chat.completions.create(model="gpt-4o-mini", messages=messages)  # type: ignore[arg-type]
    assert sim.received()[-1]["messages"] == messages


def test_malformed_documents_answer_a_400_naming_the_field(default_gateway: GatewayHandle) -> None:
    with pytest.raises(openai.BadRequestError) as info:
        _client(default_gateway).chat.completions.create(
            model="gpt-4o-mini",
            messages=[{"role": "user", "content": PRICE_QUESTION}],
            extra_body={"documents": [{"text": "Price: 18,499 TRY", "source": "https://shop.example"}]},
        )
    assert info.value.body["param"] == "documents[0].fetched_at"  # type: ignore[index]


def test_a_300k_token_contract_is_answered_within_the_window(default_gateway: GatewayHandle, sim: SimHandle) -> None:
    contract = long_contract(300_000)
    prompt = f"Here is our supply contract.\n\n{contract}\n\n{QUESTION}"
    counter = counter_for("o200k_base")
    assert counter.text(prompt) > 290_000
    got = _client(default_gateway).chat.completions.create(
        model="gpt-4o-mini",
        messages=[{"role": "user", "content": prompt}],
    )
    received = sim.received()[-1]["messages"]
    assert CLAUSE in received[-1]["content"]
    assert received[-1]["content"].startswith('<condensed strategy="chunk_and_extract"')
    assert counter.request(received) <= 128_000
    assert got.usage is not None and got.usage.prompt_tokens <= 0.8 * 128_000
    assert got.choices[0].finish_reason == "stop"


def test_a_request_that_cannot_fit_is_a_clear_400(default_gateway: GatewayHandle) -> None:
    messages = [
        {"role": "system", "content": long_contract(7_500)},
        {"role": "user", "content": long_contract(4_000, seed=3) + "\n" + QUESTION},
    ]
    with pytest.raises(openai.BadRequestError) as info:
        _client(default_gateway).chat.completions.create(model="small-window", messages=messages)  # type: ignore[arg-type]
    body = info.value.body
    assert body["code"] == "context_length_exceeded"  # type: ignore[index]
    assert "accepts at most 8000" in body["message"] and "prompt tokens" in body["message"]  # type: ignore[index]
