from __future__ import annotations

from tests.store.conftest import blank_url, db_url, engine

__all__ = ["blank_url", "db_url", "engine"]
