"""kill -9 in the middle of a burst, then a restart on the same store and spool (issue 35's fault drills).

``SIGKILL`` gives the gateway no lifespan: what is still in the writer's memory queue is gone from
memory. What must hold: every answered request is in the database exactly once after a restart on the
same store and spool (its record was written, spooled and fsynced while the database was away, or
journaled before its answer ended and replayed by the restart: store/journal.py), and ``/readyz`` is
true at each step. The streams cut by the kill were never answered; they are the only requests the
store may lack; they are journaled as forwarded (store/journal.py) and recorded as never answered.

Each drill has slow streams in flight at the kill (the simulator sleeps before every word), while
the answered requests around them are recorded.
"""

from __future__ import annotations

import os
import signal
import sqlite3
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import openai
import orjson
import pytest
from sqlalchemy import func, select

from gateway.store.engine import make_engine
from gateway.store.journal import INTERRUPTED_ERROR, INTERRUPTED_STATUS
from gateway.store.migrate import upgrade
from gateway.store.models import Request
from tests.e2e.test_database_outage import _stored_ids, _wait
from tests.procs import GatewayHandle, SimHandle, run_gateway, sim_models
from tests.store.databases import postgres_database
from tests.store.outage import DatabaseOutage, database_outage

IN_FLIGHT = 3  # slow streams cut by the kill
ANSWERED = 8  # requests answered before the kill


def _ready(gw: GatewayHandle) -> dict[str, Any]:
    ready = httpx.get(gw.url + "/readyz", timeout=10)
    assert ready.status_code == 200, f"not ready: {ready.text}"
    return dict(ready.json()["store_status"])


class _Streams:
    """``IN_FLIGHT`` slow streams in threads: the request ids the gateway gave them, and which ended."""

    def __init__(self, gw: GatewayHandle) -> None:
        self.ids: list[str] = []
        self.finished: list[str] = []
        self._threads = [threading.Thread(target=self._one, args=(gw.url, i)) for i in range(IN_FLIGHT)]
        for t in self._threads:
            t.start()

    def _one(self, url: str, i: int) -> None:
        body = {"model": "gpt-4o-mini", "stream": True, "messages": [{"role": "user", "content": f"slow {i}"}]}
        try:
            with httpx.stream("POST", url + "/v1/chat/completions", json=body, timeout=120) as r:
                self.ids.append(r.headers["x-ventana-request-id"])
                if b"[DONE]" in r.read():
                    self.finished.append(r.headers["x-ventana-request-id"])
        except httpx.HTTPError:
            return  # cut by the kill

    def join(self) -> None:
        for t in self._threads:
            t.join(60)


def _answer(gw: GatewayHandle, start: int, count: int) -> set[str]:
    """``count`` non-streamed requests answered through the SDK, ``/readyz`` true after each."""
    client = openai.OpenAI(base_url=gw.base_url, api_key="sk-kill9", max_retries=0)
    ids = set()
    for i in range(start, start + count):
        raw = client.chat.completions.with_raw_response.create(
            model="gpt-4o-mini", messages=[{"role": "user", "content": f"kill -9 drill {i}"}]
        )
        assert raw.parse().choices[0].message.content
        ids.add(raw.headers["x-ventana-request-id"])
        _ready(gw)
    return ids


def _burst_then_kill(sim: SimHandle, gw: GatewayHandle, safe: Any) -> tuple[set[str], _Streams]:
    """Streams in flight, requests answered around them; kill -9 once ``safe()`` says their records are."""
    sim.reset()
    sim.faults({"kind": "slow_stream", "seconds": 5.0, "times": IN_FLIGHT})
    streams = _Streams(gw)
    _wait(lambda: len(sim.received()) >= IN_FLIGHT, "every slow stream forwarded", 60)
    answered = _answer(gw, 0, ANSWERED)
    _wait(lambda: safe(answered), "the answered requests' records made safe", 30)
    assert not streams.finished, "the streams were still in flight at the kill"
    gw.proc.kill()
    gw.proc.wait(30)
    streams.join()
    assert not streams.finished
    return answered, streams


def _count_by_id(url: str) -> dict[str, int]:
    engine = make_engine(url)
    try:
        with engine.connect() as conn:
            rows = conn.execute(select(Request.request_id, func.count()).group_by(Request.request_id))
            return {request_id: n for request_id, n in rows}
    finally:
        engine.dispose()


@pytest.fixture
def pg_store() -> Iterator[tuple[str, DatabaseOutage]]:
    with postgres_database() as real_url, database_outage() as outage:
        upgrade(real_url)
        yield real_url, outage


@pytest.mark.postgres
def test_records_spooled_before_a_kill_are_replayed_once_by_the_restarted_gateway(
    sim: SimHandle, pg_store: tuple[str, DatabaseOutage], tmp_path: Path
) -> None:
    real_url, outage = pg_store
    spool = tmp_path / "spool.jsonl"
    config = {
        "models": sim_models(sim.base_url),
        "database_url": outage.url_through(real_url),
        "store": {"spool_path": str(spool)},
    }
    with run_gateway(tmp_path, config) as gw:
        before = _answer(gw, 100, 2)
        _wait(lambda: before <= _stored_ids(real_url), "the first requests written")
        outage.cut()  # the database away: the burst's records go to the spool

        def spooled(answered: set[str]) -> bool:
            status = _ready(gw)
            return status["database"] == "unreachable" and status["spooled"] >= len(answered)

        answered, streams = _burst_then_kill(sim, gw, spooled)
    assert spool.stat().st_size > 0, "the spool outlived the kill"
    assert not answered & _stored_ids(real_url), "the database was away: the burst is only in the spool"

    outage.restore()
    with run_gateway(tmp_path, config) as gw:  # the same store and the same spool
        _ready(gw)
        _wait(lambda: (before | answered) <= _stored_ids(real_url), "the spool replayed", 60)
        _wait(lambda: not _ready(gw)["spool_pending"], "the spool emptied")
        after = _answer(gw, 200, 2)
        _wait(lambda: after <= _stored_ids(real_url), "the restarted gateway's own requests written")
        assert _ready(gw)["dropped"] == 0
    counts = _count_by_id(real_url)
    assert (before | answered | after) <= set(counts), "every answered request recorded, 0 lost"
    assert set(counts.values()) == {1}, "no request recorded twice"
    assert set(counts) - (before | answered | after) <= set(streams.ids), "nothing but the cut streams besides"


def test_a_sqlite_store_killed_mid_burst_serves_and_records_again_after_a_restart(
    sim: SimHandle, tmp_path: Path
) -> None:
    db = tmp_path / "ventana.db"

    def stored() -> set[str]:
        with sqlite3.connect(db) as conn:
            return {row[0] for row in conn.execute("SELECT request_id FROM requests")}

    config = {"models": sim_models(sim.base_url)}
    with run_gateway(tmp_path, config) as gw:
        answered, streams = _burst_then_kill(sim, gw, lambda ids: ids <= stored())
    with run_gateway(tmp_path, config) as gw:  # the same SQLite file, its WAL left by the kill
        assert _ready(gw)["database"] == "up"
        after = _answer(gw, 200, 2)
        _wait(lambda: after <= stored(), "the restarted gateway's own requests written")
    with sqlite3.connect(db) as conn:
        counts = dict(conn.execute("SELECT request_id, COUNT(*) FROM requests GROUP BY request_id").fetchall())
        cut = dict(conn.execute("SELECT request_id, status FROM requests WHERE error = ?", (INTERRUPTED_ERROR,)))
    assert (answered | after) <= set(counts), "every answered request recorded, 0 lost"
    assert set(counts.values()) == {1}, "no request recorded twice"
    assert set(counts) - (answered | after) <= set(streams.ids)
    # the streams in flight at the kill were journaled as forwarded: recorded too, as never answered
    assert len(streams.ids) == IN_FLIGHT and cut == dict.fromkeys(streams.ids, INTERRUPTED_STATUS)


def _stored_in(db: Path) -> set[str]:
    with sqlite3.connect(db) as conn:
        return {row[0] for row in conn.execute("SELECT request_id FROM requests")}


def _descendants(pid: int) -> list[int]:
    """The processes below ``pid`` (``--workers N``: uvicorn's workers), read from /proc."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = open(f"/proc/{entry}/stat").read()  # noqa: SIM115
            except OSError:
                continue
            ppid = int(stat.rsplit(")", 1)[1].split()[1])
            children.setdefault(ppid, []).append(int(entry))
    found, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def _kill_all(gw: GatewayHandle) -> None:
    """SIGKILL to the gateway and every worker under it: no process gets its lifespan."""
    for pid in [*_descendants(gw.proc.pid), gw.proc.pid]:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            continue
    gw.proc.wait(30)


def _burst(gw: GatewayHandle, count: int) -> set[str]:
    """``count`` requests through the openai SDK, 8 at a time, every other one streamed to its end."""
    client = openai.OpenAI(base_url=gw.base_url, api_key="sk-kill9", max_retries=0)

    def ask(i: int) -> str:
        messages: Any = [{"role": "user", "content": f"kill -9 with the database up {i}"}]
        if i % 2:
            raw = client.chat.completions.with_raw_response.create(model="gpt-4o-mini", messages=messages, stream=True)
            assert "".join(c.choices[0].delta.content or "" for c in raw.parse() if c.choices)
        else:
            raw = client.chat.completions.with_raw_response.create(model="gpt-4o-mini", messages=messages)
            assert raw.parse().choices[0].message.content
        return str(raw.headers["x-ventana-request-id"])

    with ThreadPoolExecutor(8) as pool:
        return set(pool.map(ask, range(count)))


@pytest.mark.usefixtures("sdk_models")  # answers read 8 threads at a time
@pytest.mark.parametrize(("workers", "busy"), [(1, False), (2, False), (1, True)])
def test_kill9_right_after_the_last_answer_with_the_database_up_loses_no_answered_request(
    sim: SimHandle, tmp_path: Path, workers: int, busy: bool
) -> None:
    """The database up throughout: records answered but still in the writer's queue at the kill (lost
    before the journal: 19, 3 and 6 of 40 in ``benchmarks.kill9_loss``) are stored once by the restart.

    ``busy``: the database's write lock held by this test during the burst (under the 10 s busy
    timeout), so the writer holds every record in memory at the kill: the old path loses all of them
    every time, where without it the loss depends on the writer's timing."""
    db = tmp_path / "ventana.db"

    def counts() -> dict[str, int]:
        with sqlite3.connect(db) as conn:
            return dict(conn.execute("SELECT request_id, COUNT(*) FROM requests GROUP BY request_id").fetchall())

    config = {"models": sim_models(sim.base_url)}
    with run_gateway(tmp_path, config, workers=workers) as gw:
        _ready(gw)
        with sqlite3.connect(db, isolation_level=None) as lock:
            if busy:
                lock.execute("BEGIN IMMEDIATE")
            answered = _burst(gw, 32)
            _kill_all(gw)  # straight after the last answer, nothing waited for
            if busy:
                lock.execute("ROLLBACK")
    journals = list(tmp_path.glob("ventana-spool.jsonl.journal-*"))
    assert journals, "each killed worker left its journal"
    with run_gateway(tmp_path, config, workers=workers) as gw:  # replays the journals before serving
        assert _ready(gw)["database"] == "up"
        stored = counts()
        assert answered <= set(stored), f"{len(answered - set(stored))} of {len(answered)} answered requests lost"
        after = _burst(gw, 4)
        _wait(lambda: after <= set(counts()), "the restarted gateway's own requests written")
    stored = counts()
    assert set(stored.values()) == {1}, "no request recorded twice"
    assert set(stored) == answered | after
    assert not [p for p in journals if p.exists()], "the replayed journals are gone"


@pytest.mark.usefixtures("sdk_models")  # answers read 8 threads at a time
def test_kill9_after_native_responses_and_messages_answers_loses_none(sim: SimHandle, tmp_path: Path) -> None:
    """The native doors journal too: a Responses upstream (before its completed event) and an Anthropic
    one (before ``message_stop``), streamed and not, then SIGKILL and a restart. Without their journal
    calls all 16 were lost."""
    from tests.e2e.test_messages_sdk import CLAUDE, SIM_KEY_ENV, claude_models

    db = tmp_path / "ventana.db"
    config = {"models": [*sim_models(sim.base_url, wire_api="responses"), *claude_models(sim.base_url)]}
    env = {SIM_KEY_ENV: "sk-sim-anthropic", "LITELLM_LOCAL_MODEL_COST_MAP": "True"}

    def ask(i: int, url: str) -> str:
        stream = bool(i % 2)
        if i % 4 < 2:
            client = openai.OpenAI(base_url=url + "/v1", api_key="sk-kill9", max_retries=0)
            raw = client.responses.with_raw_response.create(
                model="gpt-4o-mini", input=f"native responses {i}", stream=stream
            )
            if stream:
                assert any(e.type == "response.completed" for e in raw.parse())
            else:
                assert raw.parse().output_text
            return str(raw.headers["x-ventana-request-id"])
        body = {
            "model": CLAUDE,
            "max_tokens": 64,
            "stream": stream,
            "messages": [{"role": "user", "content": f"m {i}"}],
        }
        with httpx.stream("POST", url + "/v1/messages", json=body, timeout=60) as r:
            assert r.status_code == 200, r.read()
            data = r.read()
            assert (b"message_stop" in data) if stream else orjson.loads(data)["content"]
            return r.headers["x-ventana-request-id"]

    with run_gateway(tmp_path, config, env=env) as gw:
        _ready(gw)
        # The database up but its write lock held by this test (under the 10 s busy timeout): the writer's
        # batch waits in memory, so only the journal can keep the answered requests through the kill.
        with sqlite3.connect(db, isolation_level=None) as busy:
            busy.execute("BEGIN IMMEDIATE")
            with ThreadPoolExecutor(8) as pool:
                answered = set(pool.map(lambda i: ask(i, gw.url), range(16)))
            _kill_all(gw)
            busy.execute("ROLLBACK")
        assert answered.isdisjoint(_stored_in(db)), "nothing was committed before the kill"
    with run_gateway(tmp_path, config, env=env) as gw:
        assert _ready(gw)["database"] == "up"
    with sqlite3.connect(db) as conn:
        counts = dict(conn.execute("SELECT request_id, COUNT(*) FROM requests GROUP BY request_id").fetchall())
    assert answered <= set(counts), f"{len(answered - set(counts))} of {len(answered)} answered requests lost"
    assert set(counts.values()) == {1}
