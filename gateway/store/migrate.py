"""Alembic, configured in code: upgrade a database, and check one before serving from it.

There is no ``alembic.ini``: the scripts live in ``migrations/`` at the repository top
level and the database URL comes from the Ventana settings (``database_url``). A
gateway refuses to serve from a database that is not at the head revision, because
its writer would fail on every batch and spool forever; the one exception is a fresh
SQLite file (absent, or without any table), which is migrated on the spot so that
``ventana serve`` works in an empty directory.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from sqlalchemy import Engine, inspect, text
from sqlalchemy.engine import URL
from sqlalchemy.exc import SQLAlchemyError

from gateway.errors import StoreNotMigrated
from gateway.store.engine import make_engine, normalise_url, safe_url, sqlite_path

if TYPE_CHECKING:
    from alembic.config import Config

#: The newest revision in ``migrations/versions``: a gateway starting on a database at this
#: revision needs no Alembic at all (importing it is ~0.4 s of start-up). A test keeps it
#: equal to what Alembic finds.
HEAD_REVISION = "0011_h37_summarizer_usage"

MIGRATIONS_DIR = Path(__file__).resolve().parent.parent.parent / "migrations"


def alembic_config(database_url: str) -> Config:
    """An Alembic config pointing at ``migrations/`` and ``database_url``, no ini file."""
    from alembic.config import Config

    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS_DIR))
    config.set_main_option("sqlalchemy.url", str(normalise_url(database_url)).replace("%", "%%"))
    return config


def revisions() -> list[str]:
    """Every revision id, oldest first."""
    from alembic.script import ScriptDirectory

    script = ScriptDirectory.from_config(alembic_config("sqlite://"))
    return [r.revision for r in reversed(list(script.walk_revisions()))]


def head_revision() -> str:
    from alembic.script import ScriptDirectory

    head = ScriptDirectory.from_config(alembic_config("sqlite://")).get_current_head()
    assert head is not None, "migrations/versions has no revision"
    return head


def current_revision(engine: Engine) -> str | None:
    """The revision a database is at; None for a database Alembic never touched."""
    from alembic.runtime.migration import MigrationContext

    with engine.connect() as conn:
        return MigrationContext.configure(conn).get_current_revision()


def upgrade(database_url: str, revision: str = "head") -> str | None:
    """Upgrade the database to ``revision``; return the revision it is at afterwards."""
    from alembic import command

    return _run(command.upgrade, database_url, revision)


def downgrade(database_url: str, revision: str) -> str | None:
    """Downgrade the database to ``revision`` (``base`` drops the store); return where it is now."""
    from alembic import command

    return _run(command.downgrade, database_url, revision)


def _run(step: Callable[[Config, str], None], database_url: str, revision: str) -> str | None:
    path = sqlite_path(normalise_url(database_url))
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
    config = alembic_config(database_url)
    engine = make_engine(database_url)
    try:
        with engine.begin() as conn:
            config.attributes["connection"] = conn
            step(config, revision)
        return current_revision(engine)
    finally:
        engine.dispose()


def check_store(database_url: str) -> str:
    """Make sure a gateway may write to ``database_url``; return what was done.

    Raises StoreNotMigrated, naming the database and the command to run, when the
    database is not at the head revision (or cannot be reached). A fresh SQLite file is
    migrated and ``"migrated"`` is returned; otherwise ``"ok"``.
    """
    url = normalise_url(database_url)
    shown = safe_url(database_url)
    path = sqlite_path(url)
    fresh_sqlite = url.get_backend_name() == "sqlite" and (path is None or not path.exists() or _has_no_tables(url))
    if fresh_sqlite:
        upgrade(database_url)
        return "migrated"
    engine = make_engine(database_url)
    try:
        if _stamped(engine) == HEAD_REVISION:
            return "ok"
        current = current_revision(engine)
    except SQLAlchemyError as exc:
        raise StoreNotMigrated(f"cannot open the store database {shown}: {exc}") from exc
    finally:
        engine.dispose()
    head = head_revision()
    if current == head:
        return "ok"
    if current is None:
        found = "has no Ventana schema (never migrated)"
    elif current in revisions():
        found = f"is at revision {current}, older than this gateway's {head}"
    else:
        found = f"is at revision {current}, which this gateway does not know (newer code wrote it?)"
    raise StoreNotMigrated(f"the store database {shown} {found}. Run `ventana migrate --config <your config>` first.")


def _stamped(engine: Engine) -> str | None:
    """The revision in Alembic's version table, read without Alembic; None if there is no table."""
    if "alembic_version" not in inspect(engine).get_table_names():
        return None
    with engine.connect() as conn:
        return conn.execute(text("SELECT version_num FROM alembic_version")).scalar()


def _has_no_tables(url: URL) -> bool:
    engine = make_engine(url.render_as_string(hide_password=False))
    try:
        return not inspect(engine).get_table_names()
    finally:
        engine.dispose()
