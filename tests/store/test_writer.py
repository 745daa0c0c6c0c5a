"""The writer stores what the API recorded, content once, and queries rebuild it exactly."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sqlalchemy import Engine, delete, func, select

from gateway.store import writer
from gateway.store.content import canonical_json
from gateway.store.engine import make_engine
from gateway.store.migrate import upgrade
from gateway.store.models import Blob, MessageNode, Request
from gateway.store.queries import get_request, list_requests, list_sessions
from gateway.store.writer import LOOKUP_FROM, KnownContent, write_records
from tests.store.records import TOOLS, agent_session, make_record


def _count(engine: Engine, model: type) -> int:
    with engine.connect() as conn:
        return int(conn.scalar(select(func.count()).select_from(model)) or 0)


def _write(engine: Engine, records: list) -> int:
    with engine.begin() as conn:
        return write_records(conn, records).requests


def test_a_request_reads_back_as_it_was_recorded(engine: Engine) -> None:
    messages = [{"role": "system", "content": "Be terse."}, {"role": "user", "content": "Weather in Lima?"}]
    assembled_messages = [*messages, {"role": "user", "content": "<reminder>cite sources</reminder>"}]
    calls = [{"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": '{"city":"Lima"}'}}]
    record = make_record(
        messages,
        original={"model": "gpt-4o-mini", "messages": messages, "tools": TOOLS, "tool_choice": "auto"},
        assembled={"model": "gpt-4o-mini", "messages": assembled_messages, "tools": TOOLS, "tool_choice": "auto"},
        decisions=[{"pass": "render_reminder", "action": "rendered", "tokens_before": 0, "tokens_after": 7}],
        response={"id": "chatcmpl-1", "choices": [{"index": 0, "message": {}, "finish_reason": "tool_calls"}]},
        response_text=None,
        tool_calls=calls,
        finish_reason="tool_calls",
        budget={"total": 120},
        replay_of="req-earlier",
        turn=3,
        ttfb_ms=12.5,
        status=200,
    )
    assert _write(engine, [record]) == 1
    stored = get_request(engine, record.request_id)
    assert stored is not None
    assert canonical_json(stored.original) == canonical_json(record.original)
    assert canonical_json(stored.assembled) == canonical_json(record.assembled)
    assert stored.decisions == record.decisions
    assert stored.tool_calls == calls and stored.response_text is None
    assert stored.response is not None and stored.response["choices"][0]["message"]["tool_calls"] == calls
    s = stored.summary
    assert (s.prompt_tokens, s.completion_tokens, s.cached_tokens, s.cache_write_tokens) == (10, 2, 4, 1)
    assert (s.turn, s.replay_of, s.ttfb_ms, s.caller) == (3, "req-earlier", 12.5, "c0ffee123456")
    assert stored.budget == {"total": 120}
    assert get_request(engine, record.request_id[:12]) is not None, "a unique prefix finds the request"


def test_each_distinct_message_and_tool_list_is_stored_once(engine: Engine) -> None:
    records = list(agent_session(20))
    _write(engine, records[:10])
    _write(engine, records[10:])
    final = records[-1].original["messages"]
    # every message of the final context once, plus the last answer (not resent yet), plus one tool list
    assert _count(engine, Blob) == len(final) + 1 + 1
    assert _count(engine, MessageNode) == len(final)
    assert _count(engine, Request) == 20


def test_writing_the_same_records_again_changes_nothing(engine: Engine) -> None:
    records = list(agent_session(5))
    assert _write(engine, records) == 5
    counts = (_count(engine, Blob), _count(engine, MessageNode), _count(engine, Request))
    assert _write(engine, records) == 0
    assert (_count(engine, Blob), _count(engine, MessageNode), _count(engine, Request)) == counts


@pytest.mark.parametrize("new_messages", [2, 2 * LOOKUP_FROM], ids=["inserted-at-once", "looked-up-first"])
def test_a_writer_that_knows_nothing_stores_a_stored_record_once(engine: Engine, new_messages: int) -> None:
    """Another process, or this one after a restart, writes a record again without knowing its
    content: a few unknown keys are inserted at once, many are looked up first; neither adds a row."""
    messages = [{"role": "user", "content": f"message {i}"} for i in range(new_messages)]
    record = make_record(messages)
    assert _write(engine, [record]) == 1
    counts = (_count(engine, Blob), _count(engine, MessageNode), _count(engine, Request))
    assert counts == (new_messages + 1, new_messages, 1)
    fresh = KnownContent()
    with engine.begin() as conn:
        written = write_records(conn, [record.changed(original={**record.original})], known=fresh)
    assert written.requests == 0
    assert (_count(engine, Blob), _count(engine, MessageNode), _count(engine, Request)) == counts


def _rows(engine: Engine) -> tuple[list[tuple], ...]:
    """Every stored row but the blobs' write time, in key order."""
    with engine.connect() as conn:
        blobs = conn.execute(select(Blob.hash, Blob.kind, Blob.size, Blob.content).order_by(Blob.hash)).all()
        nodes = conn.execute(select(MessageNode.__table__).order_by(MessageNode.hash)).all()
        requests = conn.execute(select(Request.__table__).order_by(Request.request_id)).all()
    return [tuple(r) for r in blobs], [tuple(r) for r in nodes], [tuple(r) for r in requests]


def test_rows_are_the_same_whether_looked_up_first_or_inserted_at_once(
    engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    records = list(agent_session(12, per_turn=2))

    def write_one_by_one() -> int:
        known, added = KnownContent(), 0
        for record in records:
            with engine.begin() as conn:
                written = write_records(conn, [record], known=known)
            known.update(written.content)
            added += written.requests
        return added

    assert write_one_by_one() == 12
    at_once = _rows(engine)
    with engine.begin() as conn:
        for model in (Request, MessageNode, Blob):
            conn.execute(delete(model))
    monkeypatch.setattr(writer, "LOOKUP_FROM", 0)  # every key looked up first, as before the direct inserts
    assert write_one_by_one() == 12
    assert _rows(engine) == at_once
    assert all(len(rows) > 12 for rows in at_once[:2]), "the session wrote more content than one record's"


def test_storage_grows_with_new_content_not_with_the_square_of_the_session(engine: Engine) -> None:
    records = list(agent_session(40, per_turn=2))
    _write(engine, records)
    with engine.connect() as conn:
        content = int(conn.scalar(select(func.sum(Blob.size))) or 0)
    final = len(canonical_json(records[-1].original))
    naive = sum(len(canonical_json(r.original)) for r in records)
    assert content < 1.1 * final, (content, final)
    assert naive > 15 * final


def test_listing_filters_by_session_and_time_newest_first(engine: Engine) -> None:
    a = [r.changed(created_at=1000.0 + i) for i, r in enumerate(agent_session(3, session_id="s-a"))]
    b = [r.changed(created_at=1001.5 + 1.5 * i) for i, r in enumerate(agent_session(2, session_id="s-b"))]
    _write(engine, a + b)
    assert [r.request_id for r in list_requests(engine, session="s-a")] == [r.request_id for r in reversed(a)]
    assert [r.request_id for r in list_requests(engine, limit=2)] == [b[1].request_id, a[2].request_id]
    assert [r.request_id for r in list_requests(engine, since=1002.0)] == [b[1].request_id, a[2].request_id]
    assert list_requests(engine, since=1003.5) == []
    sessions = {s.session_id: s for s in list_sessions(engine)}
    assert sessions["s-a"].requests == 3 and sessions["s-b"].requests == 2


def test_a_failed_request_keeps_its_partial_answer(engine: Engine) -> None:
    record = make_record(
        [{"role": "user", "content": "stream"}],
        stream=True,
        status=502,
        error="upstream closed the stream before [DONE]",
        response_text="half an ans",
        finish_reason=None,
    )
    _write(engine, [record])
    stored = get_request(engine, record.request_id)
    assert stored is not None
    assert (stored.summary.status, stored.response_text, stored.summary.error) == (502, "half an ans", record.error)


_messages = st.builds(
    lambda role, text: {"role": role, "content": text},
    st.sampled_from(["system", "user", "assistant"]),
    st.text(max_size=30),
)


@pytest.fixture(scope="module")
def sqlite_engine(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Engine]:
    url = f"sqlite:///{tmp_path_factory.mktemp('prop') / 'store.db'}"
    upgrade(url)
    engine = make_engine(url)
    yield engine
    engine.dispose()


@settings(max_examples=40, deadline=None)
@given(st.lists(_messages, min_size=1, max_size=12), st.lists(st.tuples(st.integers(0, 12), _messages), max_size=6))
def test_any_mix_of_shared_prefixes_reads_back_exactly(
    sqlite_engine: Engine, pool: list[dict], cuts: list[tuple[int, dict]]
) -> None:
    """Requests that share prefixes of one history in any pattern each read back as sent."""
    records = [make_record(pool)] + [make_record([*pool[:cut], extra]) for cut, extra in cuts]
    with sqlite_engine.begin() as conn:
        write_records(conn, records)
    for record in records:
        stored = get_request(sqlite_engine, record.request_id)
        assert stored is not None
        assert stored.original["messages"] == record.original["messages"]


def test_known_content_skips_lookups_and_still_stores_everything(engine: Engine) -> None:
    known = KnownContent()
    records = list(agent_session(12))
    for record in records:
        with engine.begin() as conn:
            written = write_records(conn, [record], known=known)
        known.update(written.content)
    final = records[-1].original["messages"]
    assert _count(engine, Blob) == len(final) + 2 and _count(engine, MessageNode) == len(final)
    last = get_request(engine, records[-1].request_id)
    assert last is not None and last.original["messages"] == final


def test_known_content_forgets_the_least_recently_used_first() -> None:
    known = KnownContent(limit=2)
    known.update(["a", "b"])
    assert "a" in known  # touching "a" makes "b" the oldest
    known.update(["c"])
    assert ("a" in known, "b" in known, "c" in known, len(known)) == (True, False, True, 2)


@settings(max_examples=15, deadline=None)
@given(
    st.lists(_messages, min_size=40, max_size=120),
    st.lists(st.tuples(st.integers(0, 120), st.booleans()), min_size=1, max_size=6),
)
def test_resent_histories_over_many_chunks_read_back_exactly(
    sqlite_engine: Engine, pool: list[dict], cuts: list[tuple[int, bool]]
) -> None:
    """The same message objects resent at any length, one transaction each: chunks skipped whole
    (their last node already written) still leave every record's history readable as sent."""
    known = KnownContent()
    records = [make_record(pool)]
    for cut, edit in cuts:
        cut = min(cut, len(pool))
        messages = [*pool[:cut], {"role": "user", "content": f"next after {cut}"}]
        if edit and cut > 1:
            messages[cut // 2] = {**messages[cut // 2], "content": "changed in place"}
        records.append(make_record(messages))
    for record in records:
        with sqlite_engine.begin() as conn:
            written = write_records(conn, [record], known=known)
        known.update(written.content)
    for record in records:
        stored = get_request(sqlite_engine, record.request_id)
        assert stored is not None
        assert stored.original["messages"] == record.original["messages"]
        assert stored.assembled["messages"] == record.assembled["messages"]
