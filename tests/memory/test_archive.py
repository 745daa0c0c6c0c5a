"""Archiving compacted history and searching it, on SQLite and PostgreSQL."""

from __future__ import annotations

from sqlalchemy import Engine

from gateway.memory.archive import archive, archived_count, passages_of, search, turn_numbers
from gateway.tokens import counter_for

COUNT = counter_for("o200k_base").text
CALL = {"id": "c1", "type": "function", "function": {"name": "book_flight", "arguments": '{"to": "LIS"}'}}
HISTORY = [
    {"role": "system", "content": "You book travel."},
    {"role": "user", "content": "I need a flight to Lisbon on the 14th."},
    {"role": "assistant", "content": None, "tool_calls": [CALL]},
    {"role": "tool", "tool_call_id": "c1", "content": "Booked IB3170, seat 22A."},
    {"role": "user", "content": "My dog Rex comes along, he is a beagle."},
    {"role": "assistant", "content": "Noted, a pet fee applies."},
    {"role": "user", "content": "What else?"},
]


def test_turns_count_user_messages_from_one() -> None:
    assert turn_numbers(HISTORY) == [0, 1, 1, 1, 2, 2, 3]


def test_a_range_becomes_one_passage_per_turn_with_its_positions() -> None:
    rows = passages_of(HISTORY, 1, 6, 300, COUNT)
    assert [(r["start"], r["end"], r["turn_start"], r["turn_end"]) for r in rows] == [(1, 4, 1, 1), (4, 6, 2, 2)]
    assert "book_flight" in rows[0]["text"] and "IB3170" in rows[0]["text"]
    assert "ib3170" in rows[0]["terms"].split()


def test_a_long_turn_is_cut_into_parts() -> None:
    long = [{"role": "user", "content": " ".join(f"Sentence {i} mentions item{i}." for i in range(300))}]
    rows = passages_of(long, 0, 1, 100, COUNT)
    assert len(rows) > 3 and [r["part"] for r in rows] == list(range(len(rows)))
    assert all(COUNT(r["text"]) <= 130 for r in rows)


def test_archive_is_verbatim_idempotent_and_searchable(engine: Engine) -> None:
    rows = passages_of(HISTORY, 1, 6, 300, COUNT)
    archive(engine, "s1", "caller:abc", rows[:1])
    archive(engine, "s1", "caller:abc", rows)  # hierarchical re-compaction re-covers turn 1
    archive(engine, "s2", "caller:other", rows)
    assert archived_count(engine, session_id="s1") == 2
    found = search(engine, "what breed is my dog Rex?", session_id="s1")
    assert [p.turns for p in found] == ["2", "1"]
    assert found[0].score > found[1].score and found[0].text == rows[1]["text"]
    assert {p.session_id for p in search(engine, "flight", owner="caller:other")} == {"s2"}


def test_search_of_an_empty_session_finds_nothing(engine: Engine) -> None:
    assert search(engine, "anything", session_id="nobody") == []
