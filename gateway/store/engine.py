"""Open the configured database: SQLite in WAL mode by default, PostgreSQL through psycopg 3.

``postgresql://`` and ``postgres://`` URLs are given the psycopg driver, since that is
the driver the project ships. Every connection to SQLite gets WAL, a busy timeout (the
gateway's writer and a CLI reader may touch the file at once) and ``synchronous=NORMAL``,
which is durable across process crashes in WAL mode.

The SQLite file holds every prompt and answer: it is created readable by its owner only
(0600), and SQLite gives its ``-wal`` and ``-shm`` files the same mode. An existing file
keeps the mode its operator gave it.
"""

from __future__ import annotations

import contextlib
import json
import os
from pathlib import Path
from typing import Any

import orjson
from sqlalchemy import Engine, create_engine, event
from sqlalchemy.engine import URL, make_url

SQLITE_BUSY_TIMEOUT_MS = 10_000


def normalise_url(database_url: str) -> URL:
    """The URL with the project's driver filled in (``postgresql+psycopg``)."""
    url = make_url(database_url)
    if url.drivername in ("postgresql", "postgres"):
        url = url.set(drivername="postgresql+psycopg")
    return url


def sqlite_path(url: URL) -> Path | None:
    """The file of an SQLite URL; None for in-memory SQLite and for other databases."""
    if url.get_backend_name() != "sqlite" or url.database in (None, "", ":memory:"):
        return None
    return Path(url.database)


def safe_url(database_url: str) -> str:
    """The URL to show people: password hidden."""
    return normalise_url(database_url).render_as_string(hide_password=True)


def json_text(value: Any) -> str:
    """JSON columns (decisions, budgets, params) encoded with orjson: the stdlib encoder SQLAlchemy
    uses by default was ~3 % of a busy gateway's CPU. Integers past 64 bits fall back to it."""
    try:
        return orjson.dumps(value, option=orjson.OPT_NON_STR_KEYS).decode()
    except TypeError:
        return json.dumps(value)


def insert_for(engine: Engine, table: Any) -> Any:
    """An INSERT into ``table`` in ``engine``'s dialect, so it has ``on_conflict_do_update`` and
    ``on_conflict_do_nothing`` (SQLite and PostgreSQL spell them the same; core INSERT has neither)."""
    if engine.dialect.name == "postgresql":
        from sqlalchemy.dialects.postgresql import insert
    else:
        from sqlalchemy.dialects.sqlite import insert  # type: ignore[assignment]
    return insert(table)


def make_engine(database_url: str, **kwargs: Any) -> Engine:
    """An engine for ``database_url``; SQLite connections are switched to WAL on connect."""
    url = normalise_url(database_url)
    kwargs.setdefault("json_serializer", json_text)
    if url.get_backend_name() != "sqlite":
        return create_engine(url, pool_pre_ping=True, **kwargs)
    path = sqlite_path(url)
    if path is not None and not path.exists():
        create_private(path)
    engine = create_engine(url, connect_args={"timeout": SQLITE_BUSY_TIMEOUT_MS / 1000}, **kwargs)
    event.listen(engine, "connect", _sqlite_pragmas)
    return engine


def create_private(path: Path) -> None:
    """Create ``path`` (empty) readable and writable by its owner only, whatever the umask."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with contextlib.suppress(FileExistsError):  # another process created it since the caller looked
        os.close(os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600))


def _sqlite_pragmas(dbapi_connection: Any, _record: Any) -> None:
    cursor = dbapi_connection.cursor()
    try:
        if not _is_memory(dbapi_connection):
            cursor.execute("PRAGMA journal_mode=WAL")
        cursor.execute("PRAGMA synchronous=NORMAL")
        cursor.execute(f"PRAGMA busy_timeout={SQLITE_BUSY_TIMEOUT_MS}")
    finally:
        cursor.close()


def _is_memory(dbapi_connection: Any) -> bool:
    cursor = dbapi_connection.cursor()
    try:
        rows = cursor.execute("PRAGMA database_list").fetchall()
    finally:
        cursor.close()
    return not any(row[2] for row in rows)
