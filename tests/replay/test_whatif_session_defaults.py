"""``ventana replay whatif --session S`` replays the session as it was served, and says so.

Before: the first configured model (a 128K window here) and the bundled policy, silently; a
session served on an 8K window with a critical rule was replayed with neither.
"""

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
from tests.procs import sim_models
from tests.store.records import make_record

SESSION = "tau-airline-served-on-the-small-window-0042"
RULE = "Never promise a delivery date."
FILLER = (
    "Shipment {i} left the Rotterdam warehouse with order ORD-{i:05d}, {n} pallets of tiles for Lisbon; "
    "the driver asks whether customs form CF-{i} needs a second signature before the border. "
)


@pytest.fixture
def config(tmp_path: Path) -> Path:
    url = f"sqlite:///{tmp_path / 'store.db'}"
    upgrade(url)
    path = tmp_path / "ventana.yaml"
    served = {"rules": {"rules": [{"text": RULE, "priority": 1}]}}
    path.write_text(
        yaml.safe_dump({"database_url": url, "models": sim_models("http://127.0.0.1:9/v1"), "policy": served})
    )
    messages: list[dict[str, object]] = [
        {"role": "system", "content": "You are a logistics assistant."},
        {"role": "user", "content": "Track my shipments."},
    ]
    records = []
    now = time.time()
    for i in range(1, 31):
        body = {"model": "small-window", "messages": list(messages)}
        records.append(
            make_record(
                list(messages),
                session_id=SESSION,
                model="small-window",
                turn=i,
                created_at=now + i,
                original=body,
                assembled=body,
            )
        )
        messages += [
            {"role": "assistant", "content": f"Noted {i}."},
            {"role": "user", "content": FILLER.format(i=i, n=3 * i) * 6},
        ]
    engine = make_engine(url)
    with engine.begin() as conn:
        write_records(conn, records)
    engine.dispose()
    return path


def _whatif(config: Path, *args: str) -> tuple[dict, str]:
    result = CliRunner().invoke(
        main, ["replay", "whatif", "--config", str(config), "--session", SESSION, "--format", "json", *args]
    )
    assert result.exit_code == 0, result.output
    (report,) = orjson.loads(result.stdout)
    return report, result.stderr


def test_a_session_is_replayed_with_its_model_and_the_served_policy(config: Path) -> None:
    report, said = _whatif(config)
    assert "model small-window (the session's)" in said and "policy served" in said
    assert report["policy"] == "served"
    assert report["totals"]["compactions"] >= 1, "the session's 8K window compacts; the first model's 128K would not"
    assert sum(t.get("tokens:reminder", 0) for t in report["turns"]) > 0, "the served rule is restated"


def test_named_model_and_policy_still_win(config: Path) -> None:
    report, said = _whatif(config, "--model", "gpt-4o-mini", "--policy", "default")
    assert "what-if with" not in said, "nothing to say when the user named both"
    assert report["policy"] == "default"
    assert report["totals"]["compactions"] == 0
    assert sum(t.get("tokens:reminder", 0) for t in report["turns"]) == 0


def test_the_turn_column_names_the_whole_conversation(config: Path) -> None:
    result = CliRunner().invoke(
        main,
        ["replay", "whatif", "--config", str(config), "--session", SESSION, "--policy", "served", "--policy", "off"],
    )
    assert result.exit_code == 0, result.output
    assert f"{SESSION}/30" in result.stdout, "a conversation id cut to 'tau-ai...' names no conversation"
