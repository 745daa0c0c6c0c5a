"""The database goes away during traffic and comes back: nothing is lost, nobody notices.

A real ``ventana serve`` process records to its own PostgreSQL database through a TCP
proxy (``tests/store/outage.py``). The openai SDK sends traffic before, during and after
the proxy is cut. Clients must get their answers throughout, the gateway must stay up and
ready (spooling is a safe degraded mode), and once the database is back every request
must be in it exactly once, with the status and text the client saw: the spooled records
were replayed.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest
from sqlalchemy import select

from gateway.store.engine import make_engine
from gateway.store.migrate import upgrade
from gateway.store.models import Request
from gateway.store.queries import get_request
from tests.procs import GatewayHandle, SimHandle, run_gateway, run_simulator, sim_models
from tests.store.databases import postgres_database
from tests.store.outage import DatabaseOutage, database_outage

pytestmark = pytest.mark.postgres


@pytest.fixture(scope="module")
def sim(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SimHandle]:
    with run_simulator(tmp_path_factory.mktemp("sim-db-outage"), record=False) as handle:
        yield handle


@pytest.fixture
def store(tmp_path: Path) -> Iterator[tuple[str, DatabaseOutage]]:
    """A migrated PostgreSQL database of its own, and a switchable path to it."""
    with postgres_database() as real_url, database_outage() as outage:
        upgrade(real_url)
        yield real_url, outage


def _ask(client: openai.OpenAI, i: int, stream: bool) -> tuple[str, str]:
    """One chat request through the SDK; its request id and the text the client received."""
    messages = [{"role": "user", "content": f"outage drill request {i}: answer in a few words"}]
    raw = client.chat.completions.with_raw_response.create(model="gpt-4o-mini", messages=messages, stream=stream)
    request_id = raw.headers["x-ventana-request-id"]
    parsed: Any = raw.parse()
    if not stream:
        return request_id, parsed.choices[0].message.content
    return request_id, "".join(c.delta.content or "" for chunk in parsed for c in chunk.choices)


def _stored_ids(real_url: str) -> set[str]:
    engine = make_engine(real_url)
    try:
        with engine.connect() as conn:
            return set(conn.execute(select(Request.request_id)).scalars())
    finally:
        engine.dispose()


def _wait(condition: Any, what: str, timeout: float = 15.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"not reached in {timeout}s: {what}"
        time.sleep(0.1)


def _store_status(gw: GatewayHandle) -> dict[str, Any]:
    ready = httpx.get(gw.url + "/readyz")
    assert ready.status_code == 200, f"gateway not ready while the store spools: {ready.text}"
    return dict(ready.json()["store_status"])


def _traffic(client: openai.OpenAI, start: int, count: int) -> dict[str, str]:
    answers: dict[str, str] = {}
    for i in range(start, start + count):
        request_id, text = _ask(client, i, stream=i % 2 == 1)
        assert text.startswith("Simulated answer"), f"request {i} got {text!r}"
        answers[request_id] = text
    return answers


def test_every_request_is_stored_after_the_database_comes_back(
    sim: SimHandle, store: tuple[str, DatabaseOutage], tmp_path: Path
) -> None:
    real_url, outage = store
    config = {
        "models": sim_models(sim.base_url),
        "database_url": outage.url_through(real_url),
        "store": {"spool_path": str(tmp_path / "spool.jsonl")},
    }
    with run_gateway(tmp_path, config) as gw:
        client = openai.OpenAI(base_url=gw.base_url, api_key="sk-outage", max_retries=0)
        before = _traffic(client, 0, 4)
        _wait(lambda: set(before) <= _stored_ids(real_url), "the first requests written")

        outage.cut()
        during = _traffic(client, 4, 8)
        _wait(lambda: _store_status(gw)["spooled"] >= len(during), "the outage's records spooled")
        status = _store_status(gw)
        assert status["database"] == "unreachable" and status["spool_pending"]
        assert not set(during) & _stored_ids(real_url), "the database was unreachable: nothing new in it"

        outage.restore()
        after = _traffic(client, 12, 4)
        answers = {**before, **during, **after}
        _wait(lambda: set(answers) <= _stored_ids(real_url), "every request in the store after recovery")
        _wait(lambda: not _store_status(gw)["spool_pending"], "the spool emptied")
        status = _store_status(gw)
        assert status["database"] == "up" and status["dropped"] == 0
        assert gw.proc.poll() is None and httpx.get(gw.url + "/healthz").status_code == 200
        spooled_metric = next(
            line
            for line in httpx.get(gw.url + "/metrics").text.splitlines()
            if line.startswith("ventana_store_spooled_total ")
        )
        assert float(spooled_metric.split()[1]) >= len(during)

    assert _stored_ids(real_url) == set(answers), "each request exactly once, and no other"
    engine = make_engine(real_url)
    try:
        for request_id, text in answers.items():
            stored = get_request(engine, request_id)
            assert stored is not None and stored.summary.status == 200 and stored.summary.error is None
            assert stored.response_text == text, request_id
    finally:
        engine.dispose()


def test_an_outage_longer_than_a_retry_sets_nothing_aside(
    sim: SimHandle, store: tuple[str, DatabaseOutage], tmp_path: Path
) -> None:
    """Issue 35: a retry that met the database still down took the connection error for records the
    database refused, and moved the whole spool to ``spool.jsonl.rejected`` while the log said
    "replayed": 0 of the outage's requests were stored after recovery. The outage here spans several
    retries (``retry_s`` is 2 s), with traffic throughout."""
    real_url, outage = store
    spool = tmp_path / "spool.jsonl"
    config = {"models": sim_models(sim.base_url), "database_url": outage.url_through(real_url)}
    config["store"] = {"spool_path": str(spool)}
    with run_gateway(tmp_path, config) as gw:
        client = openai.OpenAI(base_url=gw.base_url, api_key="sk-long-outage", max_retries=0)
        before = _traffic(client, 0, 2)
        _wait(lambda: set(before) <= _stored_ids(real_url), "the first requests written")

        outage.cut()
        during: dict[str, str] = {}
        for i in range(10):  # ~7 s of outage: three retries or more, each finding the database down
            during.update(_traffic(client, 2 + i, 1))
            status = _store_status(gw)  # 200: the spool keeps records safe
            assert status["database"] in ("up", "unreachable")
            time.sleep(0.7)
        assert _store_status(gw)["database"] == "unreachable", "/readyz says what is true"

        outage.restore()
        after = _traffic(client, 20, 2)
        answers = {**before, **during, **after}
        _wait(lambda: set(answers) <= _stored_ids(real_url), "every request in the store after recovery", 30)
        _wait(lambda: _store_status(gw)["database"] == "up", "the database reported up again")
        assert _store_status(gw)["dropped"] == 0
        assert not Path(f"{spool}.rejected").exists(), "nothing was refused, so nothing is set aside"
        assert "set aside" not in gw.log()
    assert _stored_ids(real_url) == set(answers), "each answered request exactly once, 0 lost"
