"""Canonical JSON and hash chains are the identity of stored content; redaction masks before hashing."""

from __future__ import annotations

import re

from hypothesis import given
from hypothesis import strategies as st

from gateway.store.content import ROOT, canonical_json, chain, content_hash, head
from gateway.store.redact import MASK, Redactor
from tests.store.records import make_record

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4),
    max_leaves=20,
)


@given(st.dictionaries(st.text(max_size=8), json_values, max_size=6))
def test_canonical_json_does_not_depend_on_key_order(value: dict) -> None:
    reordered = dict(reversed(list(value.items())))
    assert canonical_json(reordered) == canonical_json(value)


def test_equal_messages_share_a_hash_and_different_ones_do_not() -> None:
    a = {"role": "user", "content": "hola"}
    assert content_hash(canonical_json(a)) == content_hash(canonical_json({"content": "hola", "role": "user"}))
    assert content_hash(canonical_json(a)) != content_hash(canonical_json({"role": "user", "content": "hola "}))


@given(st.lists(st.text(min_size=1, max_size=4), max_size=8), st.lists(st.text(min_size=1, max_size=4), max_size=4))
def test_a_list_extending_another_reuses_every_node_of_it(prefix: list[str], more: list[str]) -> None:
    short, long = chain(prefix), chain(prefix + more)
    assert long[: len(short)] == short
    assert head(prefix + more) == (long[-1][0] if long else ROOT)
    assert all(parent == (long[i - 1][0] if i else ROOT) for i, (_, parent, _) in enumerate(long))


def test_order_is_part_of_a_lists_identity() -> None:
    assert head(["a", "b"]) != head(["b", "a"])


def test_redactor_masks_every_text_field_and_leaves_the_record_alone() -> None:
    redactor = Redactor([r"[\w.+-]+@[\w-]+\.[\w.]+", r"\b(?:\d[ -]?){13,16}\b"])
    messages = [{"role": "user", "content": "mail ana@example.com, card 4111 1111 1111 1111"}]
    record = make_record(messages, response_text="sent to ana@example.com", error="bad ana@example.com")
    masked = redactor.record(record)
    text = repr(masked)
    assert "ana@example.com" not in text and "4111" not in text
    assert masked.original["messages"][0]["content"] == f"mail {MASK}, card {MASK}"
    assert masked.response_text == f"sent to {MASK}"
    assert "ana@example.com" in record.original["messages"][0]["content"], "the caller's record was mutated"


def test_redactor_without_patterns_returns_the_same_record() -> None:
    record = make_record([{"role": "user", "content": "x"}])
    assert Redactor([]).record(record) is record
    assert re.escape(MASK)
