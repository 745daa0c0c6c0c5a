"""Alembic environment: the URL comes from the Ventana settings, never from an ini file.

``gateway.store.migrate`` hands over an open connection in ``config.attributes``; run
by hand (``alembic -c`` with a ``sqlalchemy.url``), the URL is the configured one, or
``database_url`` from the settings ``$VENTANA_CONFIG`` names.
"""

from __future__ import annotations

from alembic import context
from sqlalchemy import Connection

from gateway.store.engine import make_engine
from gateway.store.models import Base

config = context.config
target_metadata = Base.metadata


def _database_url() -> str:
    url = config.get_main_option("sqlalchemy.url")
    if url:
        return url
    from gateway.config import load_settings

    return load_settings().database_url


def _run(connection: Connection) -> None:
    # render_as_batch: SQLite cannot ALTER most things; batch mode copies the table instead.
    context.configure(connection=connection, target_metadata=target_metadata, render_as_batch=True, compare_type=True)
    with context.begin_transaction():
        context.run_migrations()


def run_migrations_offline() -> None:
    context.configure(url=_database_url(), target_metadata=target_metadata, literal_binds=True, render_as_batch=True)
    with context.begin_transaction():
        context.run_migrations()


def run_migrations_online() -> None:
    connection = config.attributes.get("connection")
    if connection is not None:
        _run(connection)
        return
    engine = make_engine(_database_url())
    try:
        with engine.begin() as conn:
            _run(conn)
    finally:
        engine.dispose()


if context.is_offline_mode():
    run_migrations_offline()
else:
    run_migrations_online()
