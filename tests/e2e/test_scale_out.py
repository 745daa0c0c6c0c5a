"""Three replicas behind round-robin behave as one gateway, turn by turn.

One 60-turn ToolBench agent conversation (the system prompt carries a per-turn clock)
is replayed against a small-window model with the LLM summariser on a second, slow
simulator (so a summary prepared in the background is still being written when the next
turn reaches another replica): once to a single gateway with the default in-process state, then to
three gateway processes sharing one PostgreSQL database (``session_state: database``),
the client rotating base URLs every turn, then to one ``--workers 2`` gateway. The
simulator records every body it received, so the tests compare exactly what the
provider saw: the same assembled requests, the same ``cached_tokens``, each summariser
request made once, and every request recorded in the shared store.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack
from typing import Any

import httpx
import openai
import orjson
import pytest
from prometheus_client.parser import text_string_to_metric_families
from sqlalchemy import select

from gateway.providersim.completion import is_summary_request
from gateway.store.engine import make_engine
from gateway.store.migrate import upgrade
from gateway.store.models import Request, SessionClaim
from gateway.store.queries import get_request
from tests.procs import GatewayHandle, SimHandle, run_gateway, run_simulator, sim_models
from tests.scripted import agent_session, client_requests
from tests.store.databases import postgres_database

TURNS = 60
REPLICAS = 3
#: A small window for this agent: its 53 ToolBench tools alone are ~7,000 tokens, so 8,000 cannot hold a turn.
WINDOW = 16000
#: The summariser's simulator answers this late: the next turns arrive while a summary is in flight.
SUMMARIZER_LATENCY_MS = 400
COMPACTION = {"summarizer_model": "summarizer", "summary_max_tokens": 400, "keep_recent_turns": 2}


@pytest.fixture(scope="module")
def requests_60() -> list[dict[str, Any]]:
    messages, tools = agent_session(TURNS)
    return client_requests(messages, tools, "agent-window")


@pytest.fixture(scope="module")
def sims(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[SimHandle, SimHandle]]:
    """The chat provider, and the slow provider of the summariser model."""
    with (
        run_simulator(tmp_path_factory.mktemp("sim-scale-out")) as chat,
        run_simulator(tmp_path_factory.mktemp("sim-summarizer"), latency_ms=SUMMARIZER_LATENCY_MS) as summarizer,
    ):
        yield chat, summarizer


def _config(sims: tuple[SimHandle, SimHandle], **extra: Any) -> dict[str, Any]:
    chat, summarizer = sims
    small = sim_models(chat.base_url)[1]
    models = [
        {**small, "name": "agent-window", "context_window": WINDOW},
        {**sim_models(summarizer.base_url)[0], "name": "summarizer"},
    ]
    return {"models": models, "policy": {"compaction": COMPACTION}, **extra}


def _is_summary_request(body: dict[str, Any]) -> bool:
    return is_summary_request(body["messages"])


def _replay(base_urls: list[str], requests: list[dict[str, Any]]) -> list[int]:
    """Send each turn to the next base URL (round-robin, new connection each turn); return cached_tokens."""
    cached = []
    for turn, body in enumerate(requests):
        with httpx.Client(limits=httpx.Limits(max_keepalive_connections=0)) as http:
            client = openai.OpenAI(base_url=base_urls[turn % len(base_urls)], api_key="sk-client", http_client=http)
            got = client.chat.completions.create(**body)
        details = got.usage.prompt_tokens_details if got.usage else None
        cached.append(details.cached_tokens or 0 if details else 0)
    return cached


def _run(sims: tuple[SimHandle, SimHandle], base_urls: list[str], requests: list[dict[str, Any]]) -> dict[str, Any]:
    chat, summarizer = sims
    chat.reset()
    summarizer.reset()
    cached = _replay(base_urls, requests)
    received = summarizer.received()
    assert all(_is_summary_request(b) for b in received)
    return {
        "cached": cached,
        "chats": chat.received(),
        "summaries": [orjson.dumps(b, option=orjson.OPT_SORT_KEYS) for b in received],
    }


@pytest.fixture(scope="module")
def single(
    sims: tuple[SimHandle, SimHandle], requests_60: list[dict[str, Any]], tmp_path_factory: pytest.TempPathFactory
) -> Any:
    """The reference: one gateway, in-process session state, its own SQLite store."""
    with run_gateway(tmp_path_factory.mktemp("gw-single"), _config(sims)) as gw:
        return _run(sims, [gw.base_url], requests_60)


@pytest.fixture(scope="module")
def fleet(
    sims: tuple[SimHandle, SimHandle], requests_60: list[dict[str, Any]], tmp_path_factory: pytest.TempPathFactory
) -> Any:
    """Three replicas on one fresh PostgreSQL database; yields the run and the database URL."""
    with postgres_database() as url, ExitStack() as stack:
        upgrade(url)
        config = _config(sims, database_url=url, session_state="database")
        gws: list[GatewayHandle] = [
            stack.enter_context(run_gateway(tmp_path_factory.mktemp(f"gw-replica{i}"), config)) for i in range(REPLICAS)
        ]
        run = _run(sims, [gw.base_url for gw in gws], requests_60)
        run["claims"] = Counter[str]()
        for gw in gws:  # each replica is its own scrape target; the fleet is their sum
            for family in text_string_to_metric_families(httpx.get(gw.url + "/metrics").text):
                for sample in family.samples:
                    if sample.name == "ventana_summary_claims_total":
                        run["claims"][sample.labels["outcome"]] += int(sample.value)
        stack.close()  # stop the replicas: their recorders flush on shutdown
        yield {**run, "url": url}


def _bodies(run: dict[str, Any]) -> list[bytes]:
    return [orjson.dumps(b, option=orjson.OPT_SORT_KEYS) for b in run["chats"]]


def test_replicas_assemble_the_same_requests_as_one_gateway(single: Any, fleet: Any) -> None:
    assert len(single["chats"]) == len(fleet["chats"]) == TURNS
    assert any("<summary" in str(b["messages"]) for b in single["chats"]), "the conversation must be compacted"
    for turn, (one, many) in enumerate(zip(_bodies(single), _bodies(fleet), strict=True), start=1):
        assert one == many, f"turn {turn}: the replicas forwarded a different request than one gateway"


def test_replicas_get_the_same_cached_tokens_per_turn(single: Any, fleet: Any) -> None:
    assert fleet["cached"] == single["cached"]
    assert sum(fleet["cached"]) > 0


def test_each_summariser_request_is_made_once_across_replicas(single: Any, fleet: Any) -> None:
    assert fleet["summaries"], "the LLM summariser was used"
    assert [k for k, n in Counter(fleet["summaries"]).items() if n > 1] == []
    assert sorted(fleet["summaries"]) == sorted(single["summaries"])
    engine = make_engine(fleet["url"])
    with engine.connect() as conn:
        claims = dict(conn.execute(select(SessionClaim.claim_key, SessionClaim.result)).all())
    engine.dispose()
    checkpoints = [k for k in claims if k.startswith("cp:")]
    assert checkpoints and all(claims[k] and "checkpoint" in claims[k] for k in checkpoints)
    assert len([k for k in claims if k.startswith("sum:")]) == len(fleet["summaries"])
    assert fleet["claims"]["called"] == len(fleet["summaries"]), "summed over replicas: what the model was asked"
    assert fleet["claims"]["failed"] == 0


def test_every_request_is_in_the_shared_store(fleet: Any) -> None:
    engine = make_engine(fleet["url"])
    with engine.connect() as conn:
        ids = [r for (r,) in conn.execute(select(Request.request_id).order_by(Request.created_at))]
    stored = [get_request(engine, rid) for rid in ids]
    engine.dispose()
    assert len(stored) == TURNS
    assert len({s.summary.session_id for s in stored if s}) == 1, "one conversation, whichever replica served it"
    for turn, (record, body) in enumerate(zip(stored, fleet["chats"], strict=True), start=1):
        assert record is not None and record.assembled["messages"] == body["messages"], f"turn {turn}"


def test_serve_workers_2_shares_state_like_one_gateway(
    sims: tuple[SimHandle, SimHandle],
    single: Any,
    requests_60: list[dict[str, Any]],
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    with postgres_database() as url:
        upgrade(url)
        config = _config(sims, database_url=url)  # --workers > 1 switches to the database itself
        with run_gateway(tmp_path_factory.mktemp("gw-workers"), config, workers=2) as gw:
            run = _run(sims, [gw.base_url], requests_60)
            log = gw.log()
    assert "session state is shared through the database" in log
    assert _bodies(run) == _bodies(single)
    assert run["cached"] == single["cached"]
    assert [k for k, n in Counter(run["summaries"]).items() if n > 1] == []


@pytest.mark.usefixtures("sdk_models")  # answers read 2 threads at a time
def test_concurrent_turns_on_two_replicas_summarise_once(
    sims: tuple[SimHandle, SimHandle], requests_60: list[dict[str, Any]], tmp_path_factory: pytest.TempPathFactory
) -> None:
    """The same over-threshold turn reaches two replicas at once (a client retry): one summary, same bytes."""
    body = requests_60[45]  # far over the threshold with no checkpoint yet: compacted in-pass
    with postgres_database() as url, ExitStack() as stack:
        upgrade(url)
        config = _config(sims, database_url=url, session_state="database")
        gws = [stack.enter_context(run_gateway(tmp_path_factory.mktemp(f"gw-race{i}"), config)) for i in range(2)]
        sims[0].reset()
        sims[1].reset()
        with ThreadPoolExecutor(2) as pool:
            list(pool.map(lambda gw: _replay([gw.base_url], [body]), gws))
    chats, summaries = sims[0].received(), [orjson.dumps(b) for b in sims[1].received()]
    assert len(chats) == 2 and chats[0] == chats[1]
    assert "<summary" in str(chats[0]["messages"])
    assert summaries and len(set(summaries)) == len(summaries), "no summariser request was made twice"
