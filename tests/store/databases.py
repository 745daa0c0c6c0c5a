"""Real databases for the store tests: SQLite files, and PostgreSQL databases of their own.

PostgreSQL databases are created with a unique name on the shared server and dropped
afterwards (other engineers use the same server).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from contextlib import contextmanager

import psycopg
import pytest

PG_ADMIN = "postgresql://postgres@127.0.0.1:5432/test"
PG_URL = "postgresql+psycopg://postgres@127.0.0.1:5432/{name}"


def postgres_available() -> bool:
    try:
        with psycopg.connect(PG_ADMIN, connect_timeout=3):
            return True
    except psycopg.OperationalError:
        return False


@contextmanager
def postgres_database() -> Iterator[str]:
    """A blank PostgreSQL database for one test; yields its SQLAlchemy URL."""
    if not postgres_available():
        pytest.skip(f"PostgreSQL not reachable at {PG_ADMIN} (tests/run.sh installs and starts it)")
    name = "ventana_" + uuid.uuid4().hex[:12]
    with psycopg.connect(PG_ADMIN, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    try:
        yield PG_URL.format(name=name)
    finally:
        with psycopg.connect(PG_ADMIN, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
