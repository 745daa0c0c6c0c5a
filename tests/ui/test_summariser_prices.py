"""Summariser tokens are priced at the summariser model's prices, on every page that states a cost.

A request's billed usage includes its summariser calls (``decision_tally.billed_usage``). With
``summarizer_model`` naming a model ~100x cheaper than the chat model, the request page, the session
page and the list priced the summaries' tokens at the chat model's prices (here $0.105 where the
provider billed $0.03672), and the metrics counted them under the chat model, so a dashboard
multiplying each model's tokens by its price (``ventana_model_price``) did the same.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from prometheus_client import REGISTRY
from sqlalchemy import Engine

from gateway import metrics
from gateway.store.engine import make_engine
from gateway.store.migrate import upgrade
from gateway.store.queries import get_request
from gateway.store.writer import write_records
from gateway.ui.pages import session_page
from gateway.ui.queries import list_session_rows, session_turns
from gateway.ui.request_view import outcome
from gateway.upstream.model_info import ModelInfo
from gateway.upstream.usage import Usage
from tests.store.databases import postgres_database
from tests.store.records import make_record

BIG = ModelInfo(128_000, input_cost_per_token=10e-6, output_cost_per_token=30e-6, cache_read_cost_per_token=5e-6)
CHEAP = ModelInfo(128_000, input_cost_per_token=0.1e-6, output_cost_per_token=0.4e-6, cache_read_cost_per_token=0.05e-6)
INFO = {"big-chat": BIG, "cheap-summariser": CHEAP}
PRICES = {m: (i.input_cost_per_token, i.cache_read_cost_per_token, i.output_cost_per_token) for m, i in INFO.items()}
BILLED = {
    "pass": "summarizer",
    "action": "billed",
    "reason": "1 summariser call(s) to cheap-summariser",
    "detail": {
        "model": "cheap-summariser",
        "calls": 1,
        "billed": {"prompt_tokens": 6_000, "completion_tokens": 300, "cached_tokens": 0, "cache_write_tokens": 0},
    },
}
#: The chat model's own 4,000 prompt tokens (2,000 cached) and 200 completion tokens at its prices, plus the
#: summariser's 6,000 prompt and 300 completion tokens at the summariser's.
EXPECTED = 2_000 * 10e-6 + 2_000 * 5e-6 + 200 * 30e-6 + 6_000 * 0.1e-6 + 300 * 0.4e-6


@pytest.fixture(params=["sqlite", "postgresql"])
def engine(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Engine]:
    if request.param == "sqlite":
        url = f"sqlite:///{tmp_path / 'prices.db'}"
        upgrade(url)
        made = make_engine(url)
        yield made
        made.dispose()
        return
    with postgres_database() as url:
        upgrade(url)
        made = make_engine(url)
        yield made
        made.dispose()


def test_summariser_tokens_are_priced_at_the_summariser_model(engine: Engine) -> None:
    messages = [{"role": "user", "content": "a long history, summarised"}]
    record = make_record(
        messages,
        session_id="s-summarised",
        model="big-chat",
        created_at=time.time(),
        decisions=[BILLED],
        usage=Usage(prompt_tokens=10_000, completion_tokens=500, cached_tokens=2_000),  # the request's billed usage
    )
    with engine.begin() as conn:
        write_records(conn, [record])
    stored = get_request(engine, record.request_id)
    assert stored is not None
    s = stored.summary
    assert (s.summarizer_model, s.summarizer_prompt_tokens, s.summarizer_completion_tokens) == (
        "cheap-summariser",
        6_000,
        300,
    )

    assert outcome(stored, INFO.get).cost_usd == pytest.approx(EXPECTED)  # before: $0.105, all at big-chat
    turns = session_turns(engine, "s-summarised")
    assert session_page("s-summarised", turns, price=INFO.get)["cost"] == pytest.approx(EXPECTED)
    (row,) = list_session_rows(engine, prices=PRICES).rows
    assert row.cost == pytest.approx(EXPECTED)  # the list prices in SQL, per request

    def sample(model: str, kind: str) -> float:
        return REGISTRY.get_sample_value("ventana_billed_tokens_total", {"model": model, "kind": kind}) or 0.0

    before = {(m, k): sample(m, k) for m in INFO for k in ("prompt", "completion")}
    metrics.observe(record)
    added = {(m, k): sample(m, k) - before[(m, k)] for m, k in before}
    assert added == {
        ("big-chat", "prompt"): 4_000,
        ("big-chat", "completion"): 200,
        ("cheap-summariser", "prompt"): 6_000,
        ("cheap-summariser", "completion"): 300,
    }
