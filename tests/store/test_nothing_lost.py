"""Nothing lost: every forwarded request reaches the Recorder exactly once, whatever the provider did.

Checked against the ``Recorder`` seam, parametrised over its implementations: the
in-memory and JSONL recorders and the production ``SqlRecorder`` (its queue, batched
writer and spool) on SQLite and on PostgreSQL, read back through the store's own queries.
Requests refused before forwarding (401, 429, invalid bodies) are not recorded: they
carry no context worth keeping and recording them would let anyone fill the store.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest
from prometheus_client import REGISTRY

from gateway.api.app import create_app
from gateway.api.auth import hash_key
from gateway.config import parse_settings
from gateway.sessions.identify import MAX_SESSION_ID_LENGTH, bounded_name
from gateway.store.engine import make_engine
from gateway.store.jsonl_recorder import JsonlRecorder, read_records, record_to_dict
from gateway.store.migrate import upgrade
from gateway.store.queries import get_request, list_requests
from gateway.store.record import MemoryRecorder, Recorder, RequestRecord
from gateway.store.sql_recorder import SqlRecorder
from tests.inproc import serve_in_thread
from tests.procs import SimHandle, run_simulator, sim_models
from tests.store.databases import postgres_database

Records = Callable[[], list[dict[str, Any]]]


def _memory(tmp: Path, stack: ExitStack) -> tuple[Recorder, Records]:
    recorder = MemoryRecorder()
    return recorder, lambda: [record_to_dict(r) for r in list(recorder.records)]


def _jsonl(tmp: Path, stack: ExitStack) -> tuple[Recorder, Records]:
    path = tmp / "records.jsonl"
    return JsonlRecorder(path), lambda: read_records(path)


def _sql_on(url: str, tmp: Path, stack: ExitStack) -> tuple[Recorder, Records]:
    upgrade(url)
    engine = make_engine(url)
    stack.callback(engine.dispose)

    def records() -> list[dict[str, Any]]:
        found = (get_request(engine, s.request_id) for s in list_requests(engine, limit=10_000))
        return [stored.to_dict() for stored in found if stored is not None]

    return SqlRecorder(database_url=url, spool_path=str(tmp / "spool.jsonl"), retry_s=0.2), records


def _sqlite(tmp: Path, stack: ExitStack) -> tuple[Recorder, Records]:
    return _sql_on(f"sqlite:///{tmp / 'store.db'}", tmp, stack)


def _postgres(tmp: Path, stack: ExitStack) -> tuple[Recorder, Records]:
    return _sql_on(stack.enter_context(postgres_database()), tmp, stack)


RecorderFactory = Callable[[Path, ExitStack], tuple[Recorder, Records]]
RECORDERS: dict[str, RecorderFactory] = {
    "memory": _memory,
    "jsonl": _jsonl,
    "sql-sqlite": _sqlite,
    "sql-postgresql": _postgres,
}
PARAMS = [pytest.param(name, marks=[pytest.mark.postgres] if "postgres" in name else []) for name in RECORDERS]

# (faults queued before the request, stream, status the client and the record must show)
SCENARIOS: list[tuple[str, list[dict[str, Any]], bool, int]] = [
    ("ok", [], False, 200),
    ("ok-stream", [], True, 200),
    ("429-no-retry-after", [{"kind": "status", "status": 429}], False, 429),
    ("500-past-retries", [{"kind": "status", "status": 500, "times": 2}], False, 502),
    ("503-then-ok", [{"kind": "status", "status": 503}], True, 200),
    ("closed-then-ok", [{"kind": "close"}], False, 200),
    ("closed-past-retries", [{"kind": "close", "times": 2}], True, 502),
    ("hang", [{"kind": "hang", "seconds": 4}], False, 504),
    ("malformed", [{"kind": "malformed"}], False, 502),
    ("malformed-stream", [{"kind": "malformed"}], True, 502),
    ("drop-stream", [{"kind": "drop_stream"}], True, 502),
]


@pytest.fixture(scope="module")
def cut_sim(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SimHandle]:
    with run_simulator(tmp_path_factory.mktemp("sim-lost"), record=False, cut=True) as handle:
        yield handle


@pytest.fixture(scope="module", params=PARAMS)
def gateway(
    request: pytest.FixtureRequest, cut_sim: SimHandle, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[str, Records]]:
    config = {
        "models": sim_models(cut_sim.cut_base_url),
        "upstream": {"timeout_s": 2.0, "max_retries": 1, "retry_backoff_s": 0.01},
    }
    with ExitStack() as stack:
        recorder, records = RECORDERS[request.param](tmp_path_factory.mktemp(f"rec-{request.param}"), stack)
        with serve_in_thread(create_app(parse_settings(config), recorder=recorder)) as url:
            yield url + "/v1", records


def _send(url: str, stream: bool, text: str) -> tuple[str, int, str]:
    """POST one chat request; return its request id, status and the text the client received."""
    body = {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": text}], "stream": stream}
    with httpx.stream("POST", url + "/chat/completions", json=body, timeout=30) as r:
        request_id, status = r.headers["x-ventana-request-id"], r.status_code
        if not stream or not r.is_success:
            r.read()
            choices = r.json().get("choices", []) if r.is_success else []
            return request_id, status, "".join(c["message"]["content"] for c in choices)
        received: list[str] = []
        for line in r.iter_lines():
            if not line.startswith("data: ") or line == "data: [DONE]":
                continue
            event = orjson.loads(line[6:])
            if "error" in event:
                status = 502  # what the stream's error event reports, after a 200 header
                continue
            received.extend((c.get("delta") or {}).get("content") or "" for c in event.get("choices") or ())
        return request_id, status, "".join(received)


def _wait_for(records: Records, ids: set[str], timeout: float = 10.0) -> dict[str, list[dict[str, Any]]]:
    deadline = time.monotonic() + timeout
    while True:
        by_id: dict[str, list[dict[str, Any]]] = {}
        for record in records():
            by_id.setdefault(record["request_id"], []).append(record)
        if ids <= set(by_id) or time.monotonic() > deadline:
            return by_id
        time.sleep(0.05)


def test_every_request_is_recorded_once_with_its_outcome(gateway: tuple[str, Records], cut_sim: SimHandle) -> None:
    url, records = gateway
    sent: dict[str, tuple[str, int, str]] = {}
    for name, faults, stream, expected in SCENARIOS:
        cut_sim.reset()
        if faults:
            cut_sim.faults(*faults)
        request_id, status, received = _send(url, stream, f"scenario {name}: answer in many words")
        assert status == expected, name
        sent[request_id] = (name, status, received)
    by_id = _wait_for(records, set(sent))
    for request_id, (name, status, received) in sent.items():
        assert len(by_id.get(request_id, [])) == 1, f"{name}: recorded {len(by_id.get(request_id, []))} times"
        record = by_id[request_id][0]
        assert record["status"] == status, name
        assert (record["error"] is None) == (status == 200), name
        assert (record["response_text"] or "") == received, name


def test_a_mid_stream_drop_is_recorded_as_failed_with_the_partial_text(
    gateway: tuple[str, Records], cut_sim: SimHandle
) -> None:
    url, records = gateway
    cut_sim.reset()
    cut_sim.faults({"kind": "drop_stream"})
    request_id, status, received = _send(url, True, "drop me half way through a long answer")
    record = _wait_for(records, {request_id})[request_id][0]
    assert status == 502 and record["status"] == 502
    assert "dropped the stream" in record["error"]
    assert received and record["response_text"] == received
    assert record["finish_reason"] is None


def test_a_client_that_hangs_up_mid_stream_is_recorded(gateway: tuple[str, Records], cut_sim: SimHandle) -> None:
    url, records = gateway
    cut_sim.reset()
    cut_sim.faults({"kind": "slow_stream", "seconds": 0.3})
    body = {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "a slow answer"}], "stream": True}
    with httpx.stream("POST", url + "/chat/completions", json=body, timeout=30) as r:
        request_id = r.headers["x-ventana-request-id"]
        for line in r.iter_lines():
            if '"content":"Simulated"' in line:
                break
    record = _wait_for(records, {request_id})[request_id][0]
    assert record["status"] == 499
    assert "client disconnected" in record["error"]
    assert record["response_text"].startswith("Simulated")


class _BrokenRecorder(MemoryRecorder):
    """A recorder that breaks its contract (raises), as a buggy store writer might."""

    def record(self, record: RequestRecord) -> None:
        raise RuntimeError("database is gone")


def test_a_recorder_that_raises_does_not_fail_the_answered_request(
    cut_sim: SimHandle, caplog: pytest.LogCaptureFixture
) -> None:
    app = create_app(parse_settings({"models": sim_models(cut_sim.base_url)}), recorder=_BrokenRecorder())
    with serve_in_thread(app) as url:
        for stream in (False, True):
            request_id, status, received = _send(url + "/v1", stream, "answer me even so")
            assert status == 200 and received.startswith("Simulated answer")
        deadline = time.monotonic() + 5
        while f"recorder refused request {request_id}" not in caplog.text and time.monotonic() < deadline:
            time.sleep(0.05)
        exposition = httpx.get(url + "/metrics").text.splitlines()
    assert f"recorder refused request {request_id}" in caplog.text
    lost = next(line for line in exposition if line.startswith("ventana_records_lost_total "))
    assert float(lost.split()[1]) >= 2


def _rejected_total() -> float:
    """Every ``ventana_rejected_requests_total`` sample, summed over its ``code`` labels."""
    return sum(
        sample.value
        for metric in REGISTRY.collect()
        if metric.name == "ventana_rejected_requests"
        for sample in metric.samples
        if sample.name == "ventana_rejected_requests_total"
    )


def test_requests_refused_before_forwarding_are_counted_and_recorded_without_a_body(cut_sim: SimHandle) -> None:
    keys = [f"sk-refused-{i}" for i in range(4)]  # one per caller: the rate limit is per key
    config = {
        "models": sim_models(cut_sim.base_url),
        "auth": {"enabled": True, "keys": [hash_key(k) for k in keys]},
        "limits": {"requests_per_minute": 1, "max_body_bytes": 4096},
    }
    recorder = MemoryRecorder()
    ok = {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "hello"}]}
    refused = [
        (None, ok, 401),
        (keys[0], {"model": "gpt-4o-mini", "messages": "not a list"}, 400),
        (keys[1], {**ok, "model": "no-such-model"}, 404),
        (keys[2], {**ok, "messages": [{"role": "user", "content": "x" * 5000}]}, 413),
        (keys[3], ok, 200),
        (keys[3], ok, 429),  # the same key again within the minute
    ]
    before = _rejected_total()
    ids: dict[int, str] = {}
    with serve_in_thread(create_app(parse_settings(config), recorder=recorder)) as url:
        for key, body, expected in refused:
            headers = {"authorization": f"Bearer {key}"} if key else {}
            r = httpx.post(url + "/v1/chat/completions", json=body, headers=headers, timeout=30)
            assert r.status_code == expected, (expected, r.text)
            assert expected == 200 or r.json()["error"]["message"], "a refusal names the problem"
            ids[expected] = r.headers["x-ventana-request-id"]
        deadline = time.monotonic() + 5
        while len(recorder.records) < len(refused) and time.monotonic() < deadline:
            time.sleep(0.05)
    # Before: only the 200 was recorded, and a client holding a refusal's id found nothing.
    by_id = {r.request_id: r for r in recorder.records}
    assert sorted(r.status for r in recorder.records) == [200, 400, 401, 404, 413, 429]
    for status, request_id in ids.items():
        record = by_id[request_id]
        assert record.status == status and record.route == "chat"
        if status != 200:
            assert record.error and record.original == {} and record.assembled == {}, "no body is kept"
            assert record.caller == ("anonymous" if status == 401 else record.caller)
    assert by_id[ids[429]].caller == by_id[ids[200]].caller, "the caller is the one the rate limit named"
    assert _rejected_total() - before == 5, "each refusal is counted in ventana_rejected_requests_total"


def test_a_refusal_is_recorded_under_the_session_the_door_would_name(cut_sim: SimHandle) -> None:
    """A refused request names its session as an answered one does (every session header a door reads,
    a long name bounded to the store's column), not by ``x-session-id`` alone and uncut."""
    recorder = MemoryRecorder()
    body = {"model": "no-such-model", "messages": [{"role": "user", "content": "hello"}]}
    long_name = "run-" + "x" * 200
    sent = [{"x-session-id": long_name}, {"x-claude-code-session-id": "cc-7"}]
    app = create_app(parse_settings({"models": sim_models(cut_sim.base_url)}), recorder=recorder)
    with serve_in_thread(app) as url:
        for headers in sent:
            assert httpx.post(url + "/v1/chat/completions", json=body, headers=headers, timeout=30).status_code == 404
        deadline = time.monotonic() + 5
        while len(recorder.records) < len(sent) and time.monotonic() < deadline:
            time.sleep(0.05)
    assert [r.session_id for r in recorder.records] == [bounded_name(long_name), "cc-7"]
    assert len(recorder.records[0].session_id) <= MAX_SESSION_ID_LENGTH


def test_a_record_still_being_written_is_left_for_the_next_read(tmp_path: Path) -> None:
    """A long line reaches the file in several writes: a reader between them sees half a record."""
    path = tmp_path / "records.jsonl"
    path.write_bytes(b'{"request_id":"req-1"}\n{"request_id":"req-2","original":{"mess')
    assert [r["request_id"] for r in read_records(path)] == ["req-1"]
    with path.open("ab") as fh:
        fh.write(b'ages":[]}}\n')
    assert [r["request_id"] for r in read_records(path)] == ["req-1", "req-2"]
