"""Recall is on by default where the gateway keeps a store; long-term facts stay opt-in."""

from __future__ import annotations

from typing import Any

from gateway.api.memory_runtime import MemoryRuntime
from gateway.config import parse_settings


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
