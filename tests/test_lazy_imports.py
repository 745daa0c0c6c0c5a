"""Serving never imports litellm (seconds of start-up): it is imported on first use by a non-OpenAI model."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from gateway.store.migrate import HEAD_REVISION, head_revision, upgrade
from tests.procs import REPO_ROOT, _env

_PROBE = (
    "import sys, gateway.cli, gateway.serve, gateway.api.app; "
    "from gateway.config import load_settings; "
    "gateway.api.app.create_app(load_settings()); "
    "print(sorted(m for m in sys.modules if m == 'litellm' or m.startswith('litellm.')))"
)


def test_building_the_served_app_does_not_import_litellm() -> None:
    out = subprocess.run(
        [sys.executable, "-c", _PROBE], env=_env(), capture_output=True, text=True, cwd=REPO_ROOT, check=True
    )
    assert out.stdout.strip() == "[]"


def test_starting_on_a_migrated_store_imports_neither_alembic_nor_httpx(tmp_path: Path) -> None:
    """Alembic (~0.4 s) is only needed to migrate; httpx (~0.15 s) only by an LLM summariser."""
    url = f"sqlite:///{tmp_path / 'store.db'}"
    upgrade(url)
    probe = (
        "import sys, gateway.cli, gateway.serve, gateway.api.app; "
        "from gateway.config import load_settings; from gateway.store.migrate import check_store; "
        f"assert check_store({url!r}) == 'ok'; "
        "gateway.api.app.create_app(load_settings()); "
        "print(sorted({m.split('.')[0] for m in sys.modules} & {'alembic', 'httpx'}))"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe], env=_env(), capture_output=True, text=True, cwd=REPO_ROOT, check=True
    )
    assert out.stdout.strip() == "[]"


def test_the_head_revision_the_fast_check_knows_is_alembics() -> None:
    assert head_revision() == HEAD_REVISION
