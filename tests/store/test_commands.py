"""``ventana logs``, ``inspect`` and ``store prune`` read a real store and say clearly when they cannot."""

from __future__ import annotations

import time
from pathlib import Path

import orjson
import pytest
import yaml
from click.testing import CliRunner

from gateway.cli import main
from gateway.store.engine import make_engine
from gateway.store.migrate import upgrade
from gateway.store.writer import write_records
from tests.store.records import agent_session, make_record

SUMMARY = "<summary>Earlier: the user asked about Lima.</summary>"


@pytest.fixture
def store(tmp_path: Path) -> tuple[Path, list]:
    url = f"sqlite:///{tmp_path / 'store.db'}"
    upgrade(url)
    config = tmp_path / "ventana.yaml"
    config.write_text(yaml.safe_dump({"database_url": url, "store": {"retention_days": 30}}))
    now = time.time()
    records = [r.changed(created_at=now - 3 * 86_400 + i) for i, r in enumerate(agent_session(3, session_id="s-old"))]
    original = [
        {"role": "system", "content": "You are terse. Time: 10:31"},
        {"role": "user", "content": "weather in Lima?"},
        {"role": "assistant", "content": "Sunny."},
        {"role": "user", "content": "and tomorrow?"},
    ]
    assembled = [
        {"role": "system", "content": "You are terse."},
        {"role": "user", "content": SUMMARY},
        {"role": "user", "content": "and tomorrow?"},
        {"role": "user", "content": "<reminder>Time: 10:31</reminder>"},
    ]
    decision = {"pass": "move_volatile", "action": "moved", "tokens_before": 9, "tokens_after": 6, "reason": "clock"}
    shaped = make_record(
        original,
        session_id="s-new",
        created_at=now,
        original={"model": "gpt-4o-mini", "messages": original},
        assembled={"model": "gpt-4o-mini", "messages": assembled},
        decisions=[decision],
        tokens_original=40,
        tokens_assembled=31,
        response_text="Rain.",
    )
    failed = make_record([{"role": "user", "content": "x"}], session_id="s-new", created_at=now + 1, status=502)
    records += [shaped, failed]
    engine = make_engine(url)
    with engine.begin() as conn:
        write_records(conn, records)
    engine.dispose()
    return config, records


def _run(*args: str) -> str:
    result = CliRunner().invoke(main, list(args), catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return result.output


def test_logs_lists_newest_first_with_tokens_and_status(store: tuple[Path, list]) -> None:
    config, records = store
    out = _run("logs", "--config", str(config))
    lines = [line for line in out.splitlines() if "req-" in line]
    assert [r.request_id for r in reversed(records)] == [line.split()[4] for line in lines]
    assert "40 -> 31" in out and "502" in out


def test_logs_filters_and_prints_json(store: tuple[Path, list]) -> None:
    config, records = store
    rows = orjson.loads(_run("logs", "--config", str(config), "--session", "s-old", "--json"))
    assert [r["request_id"] for r in rows] == [r.request_id for r in reversed(records[:3])]
    recent = orjson.loads(_run("logs", "--config", str(config), "--since", "10m", "--json", "--limit", "1"))
    assert [r["request_id"] for r in recent] == [records[-1].request_id]


def test_inspect_shows_the_zones_decisions_and_usage(store: tuple[Path, list]) -> None:
    config, records = store
    out = _run("inspect", "--config", str(config), records[3].request_id)
    zones = {z: out.index(z) for z in ("static prefix", "compacted summary", "recent history", "dynamic tail")}
    assert list(zones) == sorted(zones, key=zones.get)  # printed in order
    assert zones["static prefix"] < out.index("You are terse.") < zones["compacted summary"]
    assert zones["compacted summary"] < out.index("Earlier: the user asked") < zones["recent history"]
    # the query (the newest client message) opens the dynamic tail, the reminder closes it
    assert zones["dynamic tail"] < out.index("and tomorrow?") < out.index("<reminder>Time: 10:31")
    assert "move_volatile" in out and "moved" in out and "9 -> 6" in out
    assert "cached tokens" in out and "no budget report recorded" in out and "Rain." in out


def test_inspect_diff_shows_what_assembly_changed(store: tuple[Path, list]) -> None:
    config, records = store
    out = _run("inspect", "--config", str(config), records[3].request_id, "--diff")
    assert "-  0 [system] You are terse. Time: 10:31" in out
    assert "+  0 [system] You are terse." in out
    assert "+  3 [user] <reminder>Time: 10:31</reminder>" in out
    data = orjson.loads(_run("inspect", "--config", str(config), records[3].request_id, "--diff", "--json"))
    assert "+  1 [user] " + SUMMARY in data["diff"]


def test_inspect_json_has_both_bodies(store: tuple[Path, list]) -> None:
    config, records = store
    data = orjson.loads(_run("inspect", "--config", str(config), records[4].request_id, "--json"))
    assert data["status"] == 502 and data["original"]["messages"] == [{"role": "user", "content": "x"}]


def test_unknown_request_and_missing_store_are_clear_errors(store: tuple[Path, list], tmp_path: Path) -> None:
    config, _ = store
    result = CliRunner().invoke(main, ["inspect", "--config", str(config), "req-nope"])
    assert result.exit_code == 1 and "no request 'req-nope'" in result.output
    empty = tmp_path / "empty.yaml"
    empty.write_text(yaml.safe_dump({"database_url": f"sqlite:///{tmp_path / 'none.db'}"}))
    result = CliRunner().invoke(main, ["logs", "--config", str(empty)])
    assert result.exit_code == 1 and "no store at" in result.output
    result = CliRunner().invoke(main, ["logs", "--config", str(config), "--since", "yesterday"])
    assert result.exit_code == 1 and "--since expects" in result.output


def test_store_prune_applies_the_configured_retention(store: tuple[Path, list]) -> None:
    config, _ = store
    assert "0 requests" in _run("store", "prune", "--config", str(config))  # 30 days: the 3-day-old session stays
    assert "3 requests" in _run("store", "prune", "--config", str(config), "--days", "2")
    rows = orjson.loads(_run("logs", "--config", str(config), "--json"))
    assert {r["session_id"] for r in rows} == {"s-new"}
