"""Finding: ``ventana logs``/``inspect`` crashed on a session id like ``evil[/]`` (rich markup) and
printed raw terminal escapes from content. Both now print such values verbatim and inert."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from gateway.store.engine import make_engine
from gateway.store.migrate import upgrade
from gateway.store.writer import write_records
from tests.procs import _env
from tests.store.records import make_record

ESCAPES = "\x1b]0;pwned\x07\x1b[2J\x1b[31m"


@pytest.fixture
def config(tmp_path: Path) -> Path:
    url = f"sqlite:///{tmp_path / 'store.db'}"
    upgrade(url)
    record = make_record(
        [{"role": "user", "content": f"hello {ESCAPES} [bold]not markup[/bold] [/]"}],
        request_id="req-evil",
        session_id="evil[/]",
        response_text=f"answer {ESCAPES}[/]",
        error=f"[red]{ESCAPES}",
        status=502,
    )
    engine = make_engine(url)
    with engine.begin() as conn:
        write_records(conn, [record])
    engine.dispose()
    path = tmp_path / "ventana.yaml"
    path.write_text(yaml.safe_dump({"database_url": url}))
    return path


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, "-m", "gateway.cli", *args]
    return subprocess.run(cmd, env=_env(), capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize("command", [["logs"], ["inspect", "req-evil"]], ids=lambda c: c[0])
def test_stored_markup_and_escapes_are_printed_inert(config: Path, command: list[str]) -> None:
    done = _cli(*command, "--config", str(config))
    assert done.returncode == 0, done.stderr[-2000:]
    assert "evil[/]" in done.stdout
    assert "\x1b" not in done.stdout and "\x07" not in done.stdout
    if command[0] == "inspect":
        assert "[bold]not markup[/bold]" in done.stdout
