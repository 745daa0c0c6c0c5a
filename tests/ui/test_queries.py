"""The inspector's reads on SQLite and PostgreSQL: a paged, filtered, sorted sessions list with its total."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import Engine

from gateway.store.engine import make_engine
from gateway.store.migrate import upgrade
from gateway.store.writer import write_records
from gateway.ui.queries import SessionFilter, list_session_rows, neighbours, session_turns
from gateway.upstream.usage import Usage
from tests.store.databases import postgres_database
from tests.store.records import make_record

COMPACTED = {"pass": "compact_history", "action": "compacted", "tokens_before": 900, "tokens_after": 300}
REUSED = {"pass": "compact_history", "action": "checkpoint_reused", "tokens_before": 950, "tokens_after": 350}


@pytest.fixture(params=["sqlite", "postgresql"])
def engine(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Engine]:
    if request.param == "sqlite":
        url = f"sqlite:///{tmp_path / 'ui.db'}"
        upgrade(url)
        yield make_engine(url)
        return
    with postgres_database() as url:
        upgrade(url)
        engine = make_engine(url)
        yield engine
        engine.dispose()


def _fill(engine: Engine) -> float:
    """12 sessions a minute apart (s-00 oldest); s-03 has 3 turns, a compaction, a reuse and an error."""
    now = time.time()
    records = []
    for i in range(12):
        at = now - (12 - i) * 60
        messages = [{"role": "user", "content": f"question of session {i}"}]
        records.append(make_record(messages, session_id=f"s-{i:02d}", created_at=at, model="m-a" if i % 2 else "m-b"))
    history = [{"role": "user", "content": "first"}, {"role": "assistant", "content": "ok"}]
    for turn, decisions, status in ((2, [COMPACTED], 200), (3, [REUSED], 502)):
        history = [*history, {"role": "user", "content": f"turn {turn} asks"}]
        at = now - 9 * 60 + turn
        records.append(
            make_record(list(history), session_id="s-03", created_at=at, turn=turn, decisions=decisions, status=status)
        )
    with engine.begin() as conn:
        write_records(conn, records)
    return now


def test_pages_carry_the_total_and_reach_the_oldest_session(engine: Engine) -> None:
    _fill(engine)
    first = list_session_rows(engine, limit=5)
    assert first.total == 12 and [r.session_id for r in first.rows] == ["s-11", "s-10", "s-09", "s-08", "s-07"]
    last = list_session_rows(engine, offset=10, limit=5)
    assert [r.session_id for r in last.rows] == ["s-01", "s-00"]


def test_filters_sorts_and_counts(engine: Engine) -> None:
    now = _fill(engine)
    (errored,) = list_session_rows(engine, SessionFilter(status="errors")).rows
    assert (errored.session_id, errored.turns, errored.errors, errored.compactions) == ("s-03", 3, 1, 1)
    assert errored.preview == "turn 3 asks", "the last user message of the newest turn"
    assert list_session_rows(engine, SessionFilter(status="ok")).total == 11
    assert list_session_rows(engine, SessionFilter(model="m-a")).total == 6
    assert list_session_rows(engine, SessionFilter(since=now - 150)).total == 2
    assert list_session_rows(engine, SessionFilter(search="s-1")).total == 2
    one_request = session_turns(engine, "s-03")[1].request_id
    (found,) = list_session_rows(engine, SessionFilter(search=one_request[:12])).rows
    assert (found.session_id, found.turns) == ("s-03", 3), "a request id finds its whole session"
    by_turns = list_session_rows(engine, SessionFilter(sort="turns"), limit=1).rows
    assert by_turns[0].session_id == "s-03"
    oldest_first = list_session_rows(engine, SessionFilter(sort="last", descending=False), limit=1).rows
    assert oldest_first[0].session_id == "s-00"


def test_turns_mark_only_the_compaction_and_link_their_neighbours(engine: Engine) -> None:
    _fill(engine)
    turns = session_turns(engine, "s-03")
    assert [t.compacted for t in turns] == [False, True, False]
    assert [t.summary_reused for t in turns] == [False, False, True]
    before, after = neighbours(engine, "s-03", turns[1].created_at)
    assert (before, after) == (turns[0].request_id, turns[2].request_id)
    assert neighbours(engine, "s-03", turns[0].created_at)[0] is None


def test_user_and_tag_filters_total_only_the_matching_requests(engine: Engine) -> None:
    """One session whose turns carry different end users and tags: a filtered row's turns, tokens and
    cost are those of the matching requests alone (a team's bill, not the whole session's)."""
    now = time.time()
    records = []
    history: list[dict[str, object]] = []
    for turn, (user, team, prompt) in enumerate((("u-1", "a", 100), ("u-2", "b", 1_000), ("u-1", "a", 10_000))):
        history = [*history, {"role": "user", "content": f"turn {turn}"}]
        body = {"model": "gpt-4o-mini", "messages": list(history), "user": user, "metadata": {"team": team}}
        usage = Usage(prompt_tokens=prompt, completion_tokens=prompt // 10, cached_tokens=prompt // 2)
        records.append(
            make_record(
                list(history),
                session_id="s-mixed",
                created_at=now - 10 + turn,
                turn=turn + 1,
                original=body,
                assembled=body,
                usage=usage,
                tokens_original=prompt,
                tokens_assembled=prompt,
            )
        )
    with engine.begin() as conn:
        write_records(conn, records)
    prices = {"gpt-4o-mini": (1.0, 0.5, 2.0)}
    for filters in (SessionFilter(user="u-1"), SessionFilter(tag="team=a")):
        (row,) = list_session_rows(engine, filters, prices=prices).rows
        assert (row.turns, row.prompt_tokens, row.cached_tokens, row.completion_tokens) == (2, 10_100, 5_050, 1_010)
        assert (row.tokens_original, row.tokens_assembled) == (10_100, 10_100)
    (row,) = list_session_rows(engine, SessionFilter(user="u-2"), prices=prices).rows
    assert (row.turns, row.prompt_tokens) == (1, 1_000)
    by_cost = list_session_rows(engine, SessionFilter(user="u-2", sort="cost"), prices=prices).rows
    assert [r.prompt_tokens for r in by_cost] == [1_000]


def test_search_reads_messages_and_answers_and_every_column_sorts(engine: Engine) -> None:
    """The issue's list: "search matches ids only; no sort by cost, cache share, model or caller"."""
    now = _fill(engine)
    (found,) = list_session_rows(engine, SessionFilter(search="question of session 7")).rows
    assert found.session_id == "s-07", "a user message's text finds its session"
    answered = make_record(
        [{"role": "user", "content": "where is the spare key?"}],
        session_id="s-answered",
        created_at=now - 5,
        response_text="Under the blue flowerpot by the door.",
        caller="f00d00000000",
        usage=Usage(prompt_tokens=10, completion_tokens=2, cached_tokens=9),
        model="m-z",
    )
    with engine.begin() as conn:
        write_records(conn, [answered])
    (found,) = list_session_rows(engine, SessionFilter(search="blue flowerpot")).rows
    assert found.session_id == "s-answered", "an answer's text finds its session"
    top = {
        key: list_session_rows(engine, SessionFilter(sort=key, descending=True), limit=1).rows[0].session_id
        for key in ("cache", "model", "caller")
    }
    assert top == {"cache": "s-answered", "model": "s-answered", "caller": "s-answered"}
    assert list_session_rows(engine, SessionFilter(sort="model", descending=False), limit=1).rows[0].model == "m-a"
