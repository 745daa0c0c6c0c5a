"""Findings: ``/readyz`` stayed 503 after the disk recovered; deleting the database while running
lost every later record while ``/readyz`` said the gateway was up.

The recorder's readiness (what ``/readyz`` reports) now turns false while the SQLite file is
missing, the records of that time are spooled rather than written into the deleted file, and
both come back once the database takes writes again.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

from gateway.store.engine import make_engine
from gateway.store.migrate import upgrade
from gateway.store.queries import get_request
from gateway.store.sql_recorder import SqlRecorder
from tests.store.records import make_record


async def _until(condition, timeout: float = 60.0) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "not reached in time"
        await asyncio.sleep(0.05)


def _stored(url: str, request_id: str) -> bool:
    engine = make_engine(url)
    try:
        return get_request(engine, request_id) is not None
    finally:
        engine.dispose()


async def test_a_deleted_database_file_is_not_ready_spools_and_recovers(tmp_path: Path) -> None:
    db = tmp_path / "ventana.db"
    url = f"sqlite:///{db}"
    upgrade(url)
    recorder = SqlRecorder(database_url=url, spool_path=str(tmp_path / "spool.jsonl"), retry_s=0.1)
    await recorder.start()
    try:
        recorder.record(make_record([{"role": "user", "content": "before"}], request_id="req-before"))
        await _until(lambda: recorder.written == 1)
        assert recorder.ready()
        for suffix in ("", "-wal", "-shm"):
            Path(f"{db}{suffix}").unlink(missing_ok=True)
        assert not recorder.ready() and recorder.status()["database"] == "missing"
        recorder.record(make_record([{"role": "user", "content": "while gone"}], request_id="req-gone"))
        await _until(lambda: recorder.spooled == 1)
        assert not recorder.ready()
        upgrade(url)  # the operator restores (here: recreates) the database
        recorder.record(make_record([{"role": "user", "content": "after"}], request_id="req-after"))
        await _until(lambda: recorder.written == 3)
        assert recorder.ready() and recorder.status()["database"] == "up"
    finally:
        await recorder.close()
    assert _stored(url, "req-gone") and _stored(url, "req-after")


async def test_readiness_comes_back_when_the_database_takes_writes_after_a_broken_spool(tmp_path: Path) -> None:
    db = tmp_path / "ventana.db"
    url = f"sqlite:///{db}"
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("")
    recorder = SqlRecorder(database_url=url, spool_path=str(blocker / "spool.jsonl"), retry_s=0.1)
    await recorder.start()
    try:
        recorder.record(make_record([{"role": "user", "content": "no table yet"}], request_id="req-lost"))
        await _until(lambda: recorder.dropped == 1)  # database without schema, spool unwritable
        assert not recorder.ready()
        upgrade(url)
        recorder.record(make_record([{"role": "user", "content": "back"}], request_id="req-back"))
        await _until(lambda: recorder.written == 1)
        assert recorder.ready()
    finally:
        await recorder.close()
