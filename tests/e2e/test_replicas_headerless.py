"""Two replicas on PostgreSQL and Redis behind round robin forward what one gateway forwards, headerless.

Two agent loops open alike (the same system prompt and first user message) and then go their own
ways; neither sends ``X-Session-Id``. One gateway tells them apart by the conversation index
(``sessions/conversations.py``): each continues the session whose newest request it extends. The
loops' turns are interleaved and sent alternately to two replicas sharing one PostgreSQL database
and Redis, so each replica sees only one of the two loops. Before the index lived in the shared
store, each replica named its loop after the common opening, both loops shared one session's
state (checkpoints, learned spans), and one loop's summary reached the other's requests. The
simulator records the bytes it received; the two runs must match byte for byte, and the replicas
must name the sessions as one gateway does.

Also: ``ventana serve --workers 2`` with the default configuration (state switched to the
database by the command) on the same interleaved loops.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import httpx
import pytest
import redis

from gateway.store.migrate import upgrade
from tests.procs import SimHandle, run_gateway, run_simulator, sim_models
from tests.store.databases import postgres_database

REDIS_URL = "redis://127.0.0.1:6379/0"
TURNS = 12
WINDOW = 4000
SYSTEM = "You are a careful research agent. Work step by step and cite what you read."
OPENING = "Start the literature survey on tidal energy; read the sources I give you one by one."


def _redis_up() -> bool:
    try:
        return bool(redis.Redis.from_url(REDIS_URL, socket_timeout=1).ping())
    except redis.RedisError:
        return False


def _loop(name: str) -> list[list[dict[str, Any]]]:
    """The message lists an agent loop sends turn by turn; ``name`` makes its replies its own."""
    messages: list[dict[str, Any]] = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": OPENING}]
    out = []
    for turn in range(1, TURNS + 1):
        out.append([dict(m) for m in messages])
        notes = " ".join(
            f"{name} finding {turn}.{k}: the {name} source reports figure {turn * 37 + k}." for k in range(8)
        )
        messages += [
            {"role": "assistant", "content": f"Loop {name}, turn {turn}. {notes}"},
            {"role": "user", "content": f"Source {turn} for {name}: read it and note what matters. {notes}"},
        ]
    return out


def _interleaved() -> list[list[dict[str, Any]]]:
    a, b = _loop("alpha"), _loop("beta")
    return [m for pair in zip(a, b, strict=True) for m in pair]


def _run(sim: SimHandle, base_urls: list[str], key: str) -> tuple[list[bytes], list[str]]:
    """Send every request to the next replica in turn; the bytes the provider got and the session names."""
    sim.reset()
    names = []
    for i, messages in enumerate(_interleaved()):
        body = {"model": "agent-window", "messages": messages}
        got = httpx.post(
            base_urls[i % len(base_urls)] + "/chat/completions",
            json=body,
            headers={"authorization": f"Bearer {key}"},
            timeout=60,
        )
        assert got.status_code == 200, (i, got.text)
        names.append(got.headers["x-ventana-session-id"])
    return sim.record_path.read_bytes().splitlines(), names


def _config(sim: SimHandle, **extra: Any) -> dict[str, Any]:
    model = {**sim_models(sim.base_url)[1], "name": "agent-window", "context_window": WINDOW}
    return {"models": [model], "policy": {"compaction": {"keep_recent_turns": 2}}, **extra}


KEY = "sk-client-" + uuid.uuid4().hex  # a caller of this run only: Redis keys of other runs are not ours


@pytest.fixture(scope="module")
def sim(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SimHandle]:
    with run_simulator(tmp_path_factory.mktemp("sim-headerless")) as handle:
        yield handle


@pytest.fixture(scope="module")
def single(sim: SimHandle, tmp_path_factory: pytest.TempPathFactory) -> tuple[list[bytes], list[str]]:
    """The reference: one gateway, one worker, the default configuration."""
    with run_gateway(tmp_path_factory.mktemp("gw-one"), _config(sim)) as one:
        return _run(sim, [one.base_url], KEY)


def test_two_replicas_on_postgres_and_redis_forward_what_one_gateway_forwards(
    sim: SimHandle, single: tuple[list[bytes], list[str]], tmp_path: Path
) -> None:
    if not _redis_up():
        pytest.skip(f"no Redis server at {REDIS_URL}")
    with postgres_database() as url, ExitStack() as stack:
        upgrade(url)
        config = _config(sim, database_url=url, session_state="database", redis_url=REDIS_URL)
        replicas = []
        for i in range(2):
            (tmp_path / f"replica{i}").mkdir()
            replicas.append(stack.enter_context(run_gateway(tmp_path / f"replica{i}", config)))
        fleet, fleet_names = _run(sim, [r.base_url for r in replicas], KEY)
    bodies, names = single
    assert len(set(names)) == 2, "one gateway keeps the two loops apart"
    assert any(b"<summary" in line for line in bodies), "the loops must be compacted"
    assert len(fleet) == len(bodies) == 2 * TURNS
    for i, (a, b) in enumerate(zip(bodies, fleet, strict=True)):
        assert a == b, f"request {i}: the replicas forwarded other bytes than one gateway"
    assert fleet_names == names


def test_serve_workers_2_with_the_default_config_forwards_what_one_worker_forwards(
    sim: SimHandle, single: tuple[list[bytes], list[str]], tmp_path: Path
) -> None:
    with run_gateway(tmp_path, _config(sim), workers=2) as two:  # the default store: a SQLite file
        workers, worker_names = _run(sim, [two.base_url], KEY)
        log = two.log()
    assert "session state is shared through the database" in log
    assert worker_names == single[1]
    assert workers == single[0]
