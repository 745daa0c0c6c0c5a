"""Long-term facts: extracted by rules, stored per owner, deduplicated, updated when contradicted."""

from __future__ import annotations

from sqlalchemy import Engine

from gateway.assembly.memory_blocks import Fact
from gateway.memory.archive import archive, archived_count
from gateway.memory.extract_facts import extract_facts
from gateway.memory.profile import ANY_CALLER, forget, list_facts, owner_of, recall_facts, remember


def test_rules_find_first_person_facts_and_skip_questions() -> None:
    facts = extract_facts(
        [
            "Hi! My name is Michael and I'm 35 years old. I live in Seattle.",
            "I prefer TypeScript. The project uses PostgreSQL 16. Do I prefer tabs?",
            "My favorite course is Advanced Algorithms.",
        ]
    )
    by_slot = {f.slot: f.text for f in facts}
    assert by_slot == {
        "name": "Their name is Michael.",
        "age": "They are 35 years old (when stated).",
        "home": "They live in Seattle.",
        "prefers": "They prefer TypeScript.",
        "uses:postgresql": "The project uses PostgreSQL 16.",
        "favorite:course": "Their favorite course is Advanced Algorithms.",
    }


def test_a_later_statement_on_the_same_slot_wins() -> None:
    facts = extract_facts(["The project uses PostgreSQL 16.", "Update: the project uses PostgreSQL 17."])
    assert facts == [Fact("uses:postgresql", "The project uses PostgreSQL 17.")]


def test_owner_is_the_caller_and_its_user_field_never_anonymous_alone() -> None:
    assert owner_of({"user": "ana"}, "abc123") == "caller:abc123/user:ana"
    assert owner_of({}, "abc123") == "caller:abc123"
    assert owner_of({}, "anonymous") is None


def test_user_field_never_reaches_another_callers_facts(engine: Engine) -> None:
    """Finding 1: key B sending ``user: "alice"`` must not read (or write) key A's alice."""
    a, b = owner_of({"user": "alice"}, "aaaa"), owner_of({"user": "alice"}, "bbbb")
    assert a and b and a != b
    remember(engine, a, "s1", [Fact("prefers", "They prefer TypeScript.")])
    assert recall_facts(engine, b) == []
    assert [f.owner for f in list_facts(engine, ANY_CALLER + "user:alice")] == [a]


def test_facts_are_deduplicated_and_updated(engine: Engine) -> None:
    assert remember(engine, "user:ana", "s1", [Fact("prefers", "They prefer TypeScript.")]) == (1, 0)
    assert remember(engine, "user:ana", "s2", [Fact("prefers", "They prefer TypeScript.")]) == (0, 0)
    assert remember(engine, "user:ana", "s3", [Fact("prefers", "They prefer Rust."), Fact("home", "Lisbon")]) == (1, 1)
    assert remember(engine, "user:bob", "s4", [Fact("prefers", "They prefer Go.")]) == (1, 0)
    assert {f.text for f in recall_facts(engine, "user:ana")} == {"They prefer Rust.", "Lisbon"}
    stored = list_facts(engine, "user:ana")
    assert len(stored) == 2 and {f.source_session for f in stored} == {"s3"}
    assert len(list_facts(engine)) == 3


def test_forget_deletes_one_owners_facts_and_passages(engine: Engine) -> None:
    remember(engine, "user:ana", "s1", [Fact("home", "Lisbon")])
    remember(engine, "user:bob", "s2", [Fact("home", "Porto")])
    row = {"start": 1, "end": 2, "part": 0, "turn_start": 1, "turn_end": 1, "text": "user: hi", "terms": "hi"}
    archive(engine, "s1", "user:ana", [row])
    assert forget(engine, "user:ana") == (1, 1)
    assert recall_facts(engine, "user:ana") == [] and archived_count(engine, owner="user:ana") == 0
    assert [f.text for f in recall_facts(engine, "user:bob")] == ["Porto"]
