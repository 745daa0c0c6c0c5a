"""Recall is on by default where the gateway keeps a store; long-term facts stay opt-in."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from gateway.api.app import create_app
from gateway.config import parse_settings
from gateway.edges.memory import MemoryRuntime
from gateway.store.jsonl_recorder import JsonlRecorder
from gateway.store.record import MemoryRecorder, Recorder
from gateway.store.sql_recorder import SqlRecorder


def _policy(memory: dict[str, Any], *, stored: bool) -> Any:
    return MemoryRuntime(parse_settings({"policy": {"memory": memory}}), stored=stored).policy


def test_recall_is_on_by_default_and_facts_are_opt_in() -> None:
    policy = _policy({}, stored=True)
    assert policy.enabled and policy.recall and not policy.long_term


def test_without_a_store_recall_is_off_unless_asked_for() -> None:
    assert not _policy({}, stored=False).enabled, "the archive would be the only copy of what users said"
    assert _policy({"enabled": True}, stored=False).enabled


def test_switching_memory_off_wins() -> None:
    assert not _policy({"enabled": False}, stored=True).enabled


@pytest.mark.parametrize(
    ("make", "on"),
    [
        (lambda tmp: SqlRecorder(database_url=f"sqlite:///{tmp / 'store.db'}", spool_path=str(tmp / "spool")), True),
        (lambda tmp: JsonlRecorder(tmp / "records.jsonl"), False),
        (lambda tmp: MemoryRecorder(), False),
    ],
)
def test_the_app_asks_its_recorder_whether_records_are_stored(
    make: Callable[[Path], Recorder], on: bool, tmp_path: Path
) -> None:
    app = create_app(parse_settings({}), recorder=make(tmp_path))
    assert app.state.gateway.edges.memory.policy.enabled is on
