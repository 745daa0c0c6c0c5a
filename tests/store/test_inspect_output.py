"""What ``ventana inspect`` and ``ventana logs`` print: readable at a glance, nothing cut or hidden."""

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
from tests.assembly.compaction_helpers import policy, run_turns
from tests.assembly.loop_helpers import agent_loop
from tests.store.records import make_record

PIXEL = "data:image/png;base64," + "iVBORw0KGgo" * 8


def _tool(name: str) -> dict[str, object]:
    return {"type": "function", "function": {"name": name, "parameters": {"type": "object", "properties": {}}}}


@pytest.fixture
def store(tmp_path: Path) -> tuple[Path, list]:
    url = f"sqlite:///{tmp_path / 'store.db'}"
    upgrade(url)
    config = tmp_path / "ventana.yaml"
    config.write_text(yaml.safe_dump({"database_url": url}))
    now = time.time()
    messages = [
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "What is on this label?"},
                {"type": "image_url", "image_url": {"url": PIXEL}},
            ],
        }
    ]
    offered = [_tool("get_weather"), _tool("book_flight"), _tool("send_email")]
    sent = [_tool("send_email"), _tool("get_weather")]  # reordered and pruned: a set difference of one
    records = [
        make_record(
            messages,
            request_id="req-aaaa1111",
            session_id="s-glance",
            turn=7,
            created_at=now,
            original={"model": "gpt-4o-mini", "messages": messages, "tools": offered},
            assembled={"model": "gpt-4o-mini", "messages": messages, "tools": sent},
        ),
        make_record(
            [{"role": "user", "content": "x"}],
            request_id="req-aaaa2222",
            session_id="s-glance",
            turn=8,
            created_at=now + 1,
            status=502,
            error="upstream_unavailable: the provider answered 502 Bad Gateway",
        ),
    ]
    engine = make_engine(url)
    with engine.begin() as conn:
        write_records(conn, records)
    engine.dispose()
    return config, records


def _run(*args: str, color: bool = False) -> str:
    env = {"FORCE_COLOR": "1", "COLUMNS": "200"} if color else {"COLUMNS": "200"}
    result = CliRunner(env=env).invoke(main, list(args), catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return result.output


def test_an_ambiguous_prefix_says_so_and_names_the_candidates(store: tuple[Path, list]) -> None:
    config, _ = store
    result = CliRunner().invoke(main, ["inspect", "--config", str(config), "req-aaaa"])
    assert result.exit_code != 0
    assert "ambiguous" in result.output and "req-aaaa1111" in result.output and "req-aaaa2222" in result.output
    result = CliRunner().invoke(main, ["inspect", "--config", str(config), "req-zzzz"])
    assert "no request 'req-zzzz'" in result.output


def test_images_are_visible_in_the_text_output(store: tuple[Path, list]) -> None:
    config, _ = store
    out = _run("inspect", "--config", str(config), "req-aaaa1111")
    assert "[image: image/png," in out and "chars inline]" in out
    assert "iVBORw0KGgo" not in out, "the bytes of an inline image are not printed"


def test_diff_shows_tools_as_a_set_difference_in_colour(store: tuple[Path, list]) -> None:
    config, _ = store
    out = _run("inspect", "--config", str(config), "req-aaaa1111", "--diff")
    assert "tools: 3 offered, 2 sent, 2 kept" in out
    assert "-tool book_flight" in out
    assert "get_weather" not in out.split("kept", 1)[1], "a reordered tool is not a change"
    coloured = _run("inspect", "--config", str(config), "req-aaaa1111", "--diff", color=True)
    assert "\x1b[31m-tool book_flight" in coloured, "removed lines are red"
    data = orjson.loads(_run("inspect", "--config", str(config), "req-aaaa1111", "--diff", "--json"))
    assert "-tool book_flight" in data["diff"]


def test_logs_show_the_turn_and_the_error_text(store: tuple[Path, list]) -> None:
    config, _ = store
    out = _run("logs", "--config", str(config))
    header = next(line for line in out.splitlines() if "session" in line and "model" in line)
    assert "turn" in header and "error" in header
    failed = next(line for line in out.splitlines() if "req-aaaa2222" in line)
    assert " 8 " in failed and "upstream_unavailable" in failed
    ok = next(line for line in out.splitlines() if "req-aaaa1111" in line)
    assert " 7 " in ok


def test_the_budget_does_not_suggest_enabling_compaction_on_a_compacted_request(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'store.db'}"
    upgrade(url)
    config = tmp_path / "ventana.yaml"
    config.write_text(yaml.safe_dump({"database_url": url}))
    line = {"tokens": 5000, "share_of_window": 0.6, "share_of_used": 0.8, "waste": True}
    budget = {"components": {"history": {**line, "suggestion": "summarise history: enable compact_history"}}}
    compacted = {"pass": "compact_history", "action": "compacted", "tokens_before": 9000, "tokens_after": 6000}
    records = [
        make_record(
            [{"role": "user", "content": "q"}], request_id="req-compacted", budget=budget, decisions=[compacted]
        ),
        make_record([{"role": "user", "content": "q"}], request_id="req-plain", budget=budget),
    ]
    engine = make_engine(url)
    with engine.begin() as conn:
        write_records(conn, records)
    engine.dispose()
    out = _run("inspect", "--config", str(config), "req-compacted")
    assert "enable compact_history" not in out and "history is compacted already" in out
    assert "enable compact_history" in _run("inspect", "--config", str(config), "req-plain")


def test_inspect_names_the_rounds_and_tools_compaction_touched(tmp_path: Path) -> None:
    """Decisions from the real pipeline on an agent loop: the clearing and the summary as one line each."""
    url = f"sqlite:///{tmp_path / 'store.db'}"
    upgrade(url)
    config = tmp_path / "ventana.yaml"
    config.write_text(yaml.safe_dump({"database_url": url}))
    histories = [agent_loop(n, words=160) for n in range(1, 80)]
    results = run_turns(histories, policy(), window=16_000)
    cleared = next(r for r in results if any(d.action == "cleared" for d in r.decisions))
    compacted = next(r for r in results if any(d.action == "compacted" for d in r.decisions))
    records = [
        make_record(list(r.original.messages), request_id=rid, decisions=[d.to_dict() for d in r.decisions])
        for rid, r in (("req-cleared", cleared), ("req-compacted", compacted))
    ]
    engine = make_engine(url)
    with engine.begin() as conn:
        write_records(conn, records)
    engine.dispose()
    out = " ".join(_run("inspect", "--config", str(config), "req-cleared").split())
    n = sum(d.action == "cleared" for d in cleared.decisions)
    assert f"cleared {n} tool results in the rounds at messages 2-" in out, out
    assert "read_file #3, read_file #5" in out, "each cleared result by its tool and message index"
    out = " ".join(_run("inspect", "--config", str(config), "req-compacted").split())
    (d,) = [d for d in compacted.decisions if d.action == "compacted"]
    first, last = d.detail["round_numbers"]
    assert first == 1 and last == d.detail["round_count"]
    assert f"rounds 1-{last} (messages 2-{d.detail['end'] - 1}; read_file x{last}) summarised" in out, out
