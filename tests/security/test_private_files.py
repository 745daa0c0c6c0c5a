"""Finding: the SQLite file (every prompt and answer) was created 0644, readable by every local user."""

from __future__ import annotations

import os
import stat
from pathlib import Path

from sqlalchemy import text

from gateway.store.engine import make_engine
from gateway.store.spool import Spool
from tests.store.records import make_record


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_a_new_sqlite_database_and_its_wal_are_owner_only(tmp_path: Path) -> None:
    old = os.umask(0o022)
    try:
        engine = make_engine(f"sqlite:///{tmp_path / 'sub' / 'ventana.db'}")
        with engine.begin() as conn:
            conn.execute(text("CREATE TABLE t (x INTEGER)"))
            conn.execute(text("INSERT INTO t VALUES (1)"))
            files = sorted(tmp_path.glob("sub/ventana.db*"))
            assert {p.name for p in files} >= {"ventana.db", "ventana.db-wal"}
            assert {p.name: _mode(p) for p in files} == {p.name: 0o600 for p in files}
        engine.dispose()
    finally:
        os.umask(old)


def test_the_spool_file_is_owner_only(tmp_path: Path) -> None:
    spool = Spool(tmp_path / "spool" / "records.jsonl")
    spool.append([make_record([{"role": "user", "content": "hi"}])])
    assert _mode(spool.path) == 0o600
