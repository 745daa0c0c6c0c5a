"""Finding: on PostgreSQL a NUL in ``user``, ``stop`` or ``metadata`` made the request unrecordable
(answered 200, never stored) and blocked spool replay after an outage.

PostgreSQL refuses NUL in ``text`` and ``\\u0000`` in ``jsonb``. Records are made storable (a
NUL becomes U+FFFD in what is stored; the provider got the request as sent), and a spooled
record the database still refuses is set aside in ``<spool>.rejected`` instead of holding
back every record after it.
"""

from __future__ import annotations

from pathlib import Path

import orjson

from gateway.store.engine import make_engine
from gateway.store.queries import get_request
from gateway.store.record import RequestRecord
from gateway.store.spool import Spool
from gateway.store.sql_recorder import SqlRecorder
from tests.store.conftest import blank_url, db_url  # noqa: F401 (fixtures: SQLite and PostgreSQL)
from tests.store.records import make_record

NUL = "\x00"


def _poisoned(request_id: str) -> RequestRecord:
    record = make_record([{"role": "user", "content": f"hello{NUL}there"}], request_id=request_id)
    original = {**record.original, "user": f"u{NUL}", "stop": [NUL, "end"], "metadata": {"k": f"v{NUL}"}}
    return record.changed(original=original, assembled=original, error=f"quoted {NUL}")


async def test_a_record_with_nul_characters_is_stored(db_url: str, tmp_path: Path) -> None:  # noqa: F811
    recorder = SqlRecorder(database_url=db_url, spool_path=str(tmp_path / "spool.jsonl"))
    await recorder.start()
    recorder.record(_poisoned("req-nul"))
    await recorder.close()
    assert recorder.dropped == 0
    engine = make_engine(db_url)
    try:
        stored = get_request(engine, "req-nul")
    finally:
        engine.dispose()
    assert stored is not None
    assert "hello" in orjson.dumps(stored).decode()


async def test_a_spooled_record_the_database_refuses_is_set_aside(db_url: str, tmp_path: Path) -> None:  # noqa: F811
    spool = Spool(tmp_path / "spool.jsonl")
    good = [make_record([{"role": "user", "content": f"turn {i}"}], request_id=f"req-{i}") for i in range(3)]
    refused = _poisoned("req-bad").changed(finish_reason="x" * 100)  # past String(32): PostgreSQL refuses it
    spool.append([good[0], refused, *good[1:]])
    recorder = SqlRecorder(database_url=db_url, spool_path=str(spool.path))
    await recorder.start()
    recorder.record(make_record([{"role": "user", "content": "after"}], request_id="req-after"))
    await recorder.close()
    engine = make_engine(db_url)
    try:
        assert all(get_request(engine, f"req-{i}") is not None for i in (0, 1, 2, "after"))
    finally:
        engine.dispose()
    assert not spool.pending()
    if db_url.startswith("postgresql"):
        with recorder.rejected.take() as set_aside:
            assert [r.request_id for r in set_aside] == ["req-bad"]
