"""Migrations: blank and every revision reach the head and match the models; serving checks the revision."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from sqlalchemy import inspect, text

from gateway.errors import StoreNotMigrated
from gateway.store.engine import make_engine
from gateway.store.migrate import check_store, downgrade, head_revision, revisions, upgrade
from gateway.store.models import Base
from gateway.store.queries import get_request
from tests.procs import REPO_ROOT, _env, free_port
from tests.store.databases import postgres_database
from tests.store.migration_seeds import SEEDS


def _schema_diff(url: str) -> list:
    engine = make_engine(url)
    try:
        with engine.connect() as conn:
            return compare_metadata(MigrationContext.configure(conn, opts={"compare_type": True}), Base.metadata)
    finally:
        engine.dispose()


def test_blank_database_migrates_to_a_schema_equal_to_the_models(blank_url: str) -> None:
    assert upgrade(blank_url) == head_revision()
    assert _schema_diff(blank_url) == []


@pytest.mark.parametrize("revision", revisions())
def test_migrate_from_every_revision(blank_url: str, revision: str) -> None:
    upgrade(blank_url, revision)
    engine = make_engine(blank_url)
    try:
        with engine.begin() as conn:
            for table, rows in SEEDS.get(revision, {}).items():
                for row in rows:
                    columns = ", ".join(row)
                    conn.execute(
                        text(f"INSERT INTO {table} ({columns}) VALUES ({', '.join(':' + c for c in row)})"), row
                    )
        assert upgrade(blank_url) == head_revision()
        assert _schema_diff(blank_url) == []
        if revision in SEEDS:
            seeded = get_request(engine, "req-seed")
            assert seeded is not None and seeded.original["messages"] == [{"role": "user", "content": "hi"}]
    finally:
        engine.dispose()


def test_downgrade_to_blank_and_back(db_url: str) -> None:
    assert downgrade(db_url, "base") is None
    engine = make_engine(db_url)
    try:
        assert inspect(engine).get_table_names() in ([], ["alembic_version"])
    finally:
        engine.dispose()
    assert upgrade(db_url) == head_revision()
    assert _schema_diff(db_url) == []


def test_a_fresh_sqlite_path_is_migrated_on_the_spot(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'new' / 'dir' / 'ventana.db'}"
    assert check_store(url) == "migrated"
    assert check_store(url) == "ok"
    assert _schema_diff(url) == []


def test_an_sqlite_file_with_foreign_tables_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "other.db"
    engine = make_engine(f"sqlite:///{path}")
    with engine.begin() as conn:
        conn.execute(text("CREATE TABLE notes (id INTEGER)"))
    engine.dispose()
    with pytest.raises(StoreNotMigrated, match=r"never migrated.*ventana migrate"):
        check_store(f"sqlite:///{path}")


def test_an_sqlite_file_at_an_unknown_revision_is_refused(tmp_path: Path) -> None:
    db_url = f"sqlite:///{tmp_path / 'store.db'}"
    upgrade(db_url)
    engine = make_engine(db_url)
    with engine.begin() as conn:
        conn.execute(text("UPDATE alembic_version SET version_num = 'ffff'"))
    engine.dispose()
    with pytest.raises(StoreNotMigrated, match="ffff"):
        check_store(db_url)


@pytest.mark.postgres
def test_an_unmigrated_postgres_is_refused_until_migrated() -> None:
    with postgres_database() as url:
        with pytest.raises(StoreNotMigrated, match=r"has no Ventana schema.*ventana migrate"):
            check_store(url)
        upgrade(url)
        assert check_store(url) == "ok"


def _cli(*args: str, cwd: Path, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "gateway.cli", *args],
        env=_env(),
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


@pytest.mark.postgres
def test_serve_refuses_an_unmigrated_postgres_and_migrate_fixes_it(tmp_path: Path) -> None:
    with postgres_database() as url:
        config = tmp_path / "ventana.yaml"
        models = [{"name": "m", "litellm_model": "openai/gpt-4o-mini", "api_base": "http://127.0.0.1:9/v1"}]
        config.write_text(yaml.safe_dump({"database_url": url, "models": models}))
        refused = _cli("serve", "--config", str(config), "--port", str(free_port()), cwd=tmp_path)
        assert refused.returncode != 0
        assert "has no Ventana schema" in refused.stderr and "ventana migrate" in refused.stderr
        assert "password" not in refused.stderr
        migrated = _cli("migrate", "--config", str(config), cwd=tmp_path)
        assert migrated.returncode == 0, migrated.stderr
        assert f"to revision {head_revision()}" in migrated.stdout
        again = _cli("migrate", "--config", str(config), cwd=tmp_path)
        assert "already at revision" in again.stdout


def test_migrations_need_no_alembic_ini_at_the_top_level() -> None:
    assert not (REPO_ROOT / "alembic.ini").exists()
    assert (REPO_ROOT / "migrations" / "env.py").exists()


def test_an_unreachable_database_is_a_clear_error_not_a_traceback() -> None:
    url = f"postgresql+psycopg://postgres:hunter2@127.0.0.1:{free_port()}/nowhere?connect_timeout=2"
    with pytest.raises(StoreNotMigrated, match=r"cannot open the store database") as caught:
        check_store(url)
    assert "hunter2" not in str(caught.value)
