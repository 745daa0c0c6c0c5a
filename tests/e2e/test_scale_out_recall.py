"""Two replicas recall what one gateway recalls while an archive's vectors come a few at a time.

An archive task gives vectors to at most ``memory.embed_per_archive`` passages (newest first, the rest
ranked by their words until a later archive reaches them). Which passages rank with vectors must follow
from the turns alone: session 47's background vectors made a replica recall another passage than one
gateway, depending on when its encoder ran. Here a real rhelm chat (``tests/data/long_conversations``) is
replayed, every other user turn, to a 4,000-token model with a bound of one passage an archive, so every
compaction leaves passages without vectors: once to one gateway (in-process state, SQLite), then to two
gateway processes on one PostgreSQL database (``session_state: database``), alternating every turn.
The simulator records what it received: the requests must be the same, recalled passages included (with
a bound of 3 on the replicas they differ at turn 7: the comparison sees which passages had vectors).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import httpx
import openai
import orjson
import pytest
from sqlalchemy import text

from gateway.store.engine import make_engine
from gateway.store.migrate import upgrade
from tests.procs import SimHandle, run_gateway, run_simulator, sim_models
from tests.store.databases import postgres_database

RHELM = Path(__file__).resolve().parents[1] / "data" / "long_conversations" / "rhelm.jsonl"
WINDOW = 4000
MEMORY = {"embed_per_archive": 1}


def _requests() -> list[list[dict[str, Any]]]:
    """The history up to every other user message of the chat, the dataset's own replies kept."""
    (chat,) = [orjson.loads(line) for line in RHELM.read_bytes().splitlines() if line.strip()][:1]
    messages = [{"role": m["role"], "content": m["content"]} for m in chat["messages"]]
    users = [i for i, m in enumerate(messages) if m["role"] == "user"]
    return [messages[: i + 1] for i in users[1::2]]


@pytest.fixture(scope="module")
def sim(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SimHandle]:
    with run_simulator(tmp_path_factory.mktemp("sim-recall-scale")) as handle:
        yield handle


def _config(sim: SimHandle, **extra: Any) -> dict[str, Any]:
    model = {**sim_models(sim.base_url)[0], "name": "chat-window", "context_window": WINDOW}
    return {"models": [model], "policy": {"memory": MEMORY}, **extra}


def _replay(sim: SimHandle, base_urls: list[str]) -> list[bytes]:
    sim.reset()
    for turn, messages in enumerate(_requests()):
        with httpx.Client(limits=httpx.Limits(max_keepalive_connections=0)) as http:
            client = openai.OpenAI(base_url=base_urls[turn % len(base_urls)], api_key="sk-client", http_client=http)
            client.chat.completions.create(
                model="chat-window",
                messages=messages,
                extra_headers={"x-session-id": "rhelm-recall"},  # type: ignore[arg-type]
            )
    return [orjson.dumps(b, option=orjson.OPT_SORT_KEYS) for b in sim.received()]


def test_replicas_recall_what_one_gateway_recalls(sim: SimHandle, tmp_path_factory: pytest.TempPathFactory) -> None:
    with run_gateway(tmp_path_factory.mktemp("gw-one"), _config(sim)) as gw:
        single = _replay(sim, [gw.base_url])
    with postgres_database() as url, ExitStack() as stack:
        upgrade(url)
        config = _config(sim, database_url=url, session_state="database")
        gws = [stack.enter_context(run_gateway(tmp_path_factory.mktemp(f"gw-r{i}"), config)) for i in range(2)]
        fleet = _replay(sim, [g.base_url for g in gws])
        engine = make_engine(url)
        with engine.connect() as conn:
            archived, embedded = conn.execute(text("select count(*), count(vector) from memory_passages")).one()
        engine.dispose()
    assert len(single) == len(fleet) == len(_requests())
    assert any(b"<recalled" in body for body in single), "recall must place passages for this test to say anything"
    assert 0 < embedded < archived, "the bound must have left passages without vectors"
    for turn, (one, many) in enumerate(zip(single, fleet, strict=True), start=1):
        assert one == many, f"turn {turn}: the replicas forwarded a different request than one gateway"
