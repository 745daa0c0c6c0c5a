"""IncrementalParser: a resent body parses to exactly what a full parse gives, only faster."""

from __future__ import annotations

import json
from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from benchmarks.profiles import build_profiles
from gateway.api.incremental_parse import IncrementalParser

texts = st.text(alphabet=st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=40)
numbers = st.integers(-5, 5) | st.floats(allow_nan=False, allow_infinity=False)
messages = st.fixed_dictionaries(
    {"role": st.sampled_from(["user", "assistant", "system"]), "content": texts},
    optional={"name": st.sampled_from(["messages", "a", "é"]), "n": numbers},
)
bodies = st.one_of(
    st.fixed_dictionaries({"messages": st.lists(messages, min_size=2, max_size=6), "model": st.just("gpt-4o")}),
    st.fixed_dictionaries(  # the OpenAI SDK's order: scalars, then messages
        {"model": texts, "stream": st.booleans(), "messages": st.lists(messages, min_size=2, max_size=6)}
    ),
)


def encodings(body: dict[str, Any]) -> list[bytes]:
    """The ways clients serialise a body: compact (httpx, orjson) and with spaces (json.dumps)."""
    return [orjson.dumps(body), json.dumps(body).encode(), json.dumps(body, ensure_ascii=False).encode()]


def first_turn(parser: IncrementalParser, raw: bytes) -> Any:
    body, reused = parser.parse(raw, "caller")
    assert reused == 0
    parser.remember(raw, "caller", body, reused)
    return body


def parses_like_a_full_parse(parser: IncrementalParser, raw: bytes, first: Any) -> tuple[Any, int] | None:
    """``parser.parse(raw)``, checked against a full parse: the same values, types and key order, or the same
    refusal (None then); the messages it reused are ``first``'s objects."""
    try:
        expected = orjson.loads(raw)
    except orjson.JSONDecodeError:
        with pytest.raises(orjson.JSONDecodeError):
            parser.parse(raw, "caller")
        return None
    body, reused = parser.parse(raw, "caller")
    assert body == expected
    assert orjson.dumps(body) == orjson.dumps(expected), "same values, types (1 stays 1, 1.0 stays 1.0), key order"
    assert all(m is o for m, o in zip(body["messages"][:reused], first["messages"], strict=False))
    return body, reused


@settings(max_examples=300, deadline=None)
@given(
    first=bodies,
    appended=st.lists(messages, max_size=3),
    edit=st.none() | st.tuples(st.integers(0, 6), messages),
    extra=st.dictionaries(st.sampled_from(["temperature", "user", "messages", "tools"]), texts, max_size=2),
    style=st.integers(0, 2),
    cut=st.none() | st.integers(1, 50),
)
def test_a_next_turn_parses_to_what_a_full_parse_gives(
    first: dict[str, Any],
    appended: list[dict[str, Any]],
    edit: tuple[int, dict[str, Any]] | None,
    extra: dict[str, str],
    style: int,
    cut: int | None,
) -> None:
    parser = IncrementalParser()
    parsed_first = first_turn(parser, orjson.dumps(first))
    second = {**first, "messages": [*first["messages"], *appended], **extra}
    if edit is not None and edit[0] < len(second["messages"]) and "messages" not in extra:
        second["messages"][edit[0]] = edit[1]
    raw = encodings(second)[style]
    if cut is not None:
        raw = raw[:-cut]  # a truncated body: both parsers must refuse it
    parses_like_a_full_parse(parser, raw, parsed_first)


def test_a_resent_agent_history_is_reused_whole_and_the_new_turn_parsed() -> None:
    parser = IncrementalParser()
    raw = build_profiles(("agent105k",))[0].body
    first = first_turn(parser, raw)
    body = orjson.loads(raw)
    body["messages"].append({"role": "user", "content": "Thanks. Now book the cheapest one."})
    again = orjson.dumps(body)
    assert parser.new_bytes(again, "caller") < len(again) // 20, "only the new turn and the tools after it"
    parsed, reused = parser.parse(again, "caller")  # uses what new_bytes found
    assert reused == len(first["messages"]) and parsed == body
    assert parsed["messages"][5] is first["messages"][5]
    parser.remember(again, "caller", parsed, reused)
    third, reused = parser.parse(again, "caller")
    assert reused == len(body["messages"]) and third == body, "the turn just parsed is remembered in its turn"
    assert parser.parse(again, "someone else")[1] == 0, "callers never share entries"
    body["messages"][100] = {**body["messages"][100], "content": "an edited message"}
    edited = orjson.dumps(body)
    parsed, reused = parser.parse(edited, "caller")
    assert reused == 100 and parsed == body, "the history up to the edit is reused, the rest parsed"
    assert parsed["messages"][101] is not first["messages"][101]


def test_bodies_it_cannot_vouch_for_are_parsed_whole() -> None:
    parser = IncrementalParser()
    spaced = json.dumps({"messages": [{"role": "user", "content": "hi"}], "model": "m"}).encode()
    first_turn(parser, spaced)  # messages written with spaces: nothing is remembered
    nested_first = orjson.dumps({"metadata": {"messages": []}, "messages": [{"role": "user", "content": "hi"}]})
    first_turn(parser, nested_first)  # an object before 'messages': nothing is remembered
    assert len(parser) == 0
    compact = orjson.dumps({"model": "m", "stream": False, "messages": [{"role": "user", "content": "hi"}]})
    first_turn(parser, compact)  # scalars first, as the OpenAI SDK writes them
    assert len(parser) == 1
    duplicate = compact[:-1] + b',"messages":[{"role":"user","content":"other"}]}'
    body, reused = parser.parse(duplicate, "caller")
    assert reused == 0 and body == orjson.loads(duplicate), "a later duplicate key wins, as in a full parse"


def test_memory_is_bounded_by_entries_and_bytes() -> None:
    parser = IncrementalParser(entries=2, max_bytes=10_000)
    for i in range(3):
        first_turn(parser, orjson.dumps({"messages": [{"role": "user", "content": f"conversation {i}"}]}))
    assert len(parser) == 2
    big = orjson.dumps({"messages": [{"role": "user", "content": "x" * 20_000}]})
    first_turn(parser, big)
    assert parser.parse(big, "caller")[1] == 0, "a body over the byte budget is not kept"


def test_an_unchanged_tool_list_is_last_turns_checked_object() -> None:
    """An agent resends its tools every turn: the parser hands back last turn's (checked) list, so the
    checks and every fact kept per tool object are not redone; a changed list is parsed and checked anew."""
    parser = IncrementalParser()
    raw = build_profiles(("agent14k",))[0].body
    first = first_turn(parser, raw)
    body = orjson.loads(raw)
    body["messages"].append({"role": "user", "content": "And the next one?"})
    again = orjson.dumps(body)
    parsed, reused = parser.parse(again, "caller")
    assert parsed == body and reused == len(first["messages"])
    assert parsed["tools"] is first["tools"] and parser.vouches_tools(parsed)
    parser.remember(again, "caller", parsed, reused)
    assert parser.parse(again, "caller")[0]["tools"] is first["tools"], "carried over to the turn after, unparsed"
    body["tools"] = [*body["tools"][:-1], {**body["tools"][-1], "type": "function"}]  # equal: still vouched
    body["tools"][0] = {**body["tools"][0], "function": {**body["tools"][0]["function"], "description": "changed"}}
    changed = orjson.dumps(body)
    parsed, _ = parser.parse(changed, "caller")
    assert parsed == body and parsed["tools"] is not first["tools"] and not parser.vouches_tools(parsed)


tails = st.dictionaries(
    st.sampled_from(["tools", "tool_choice", "temperature", "stream_options", "user"]),
    st.lists(st.fixed_dictionaries({"name": texts, "n": numbers}), max_size=3) | texts | numbers,
    max_size=3,
)


@settings(max_examples=300, deadline=None)
@given(
    first=bodies,
    tail=tails,
    appended=st.lists(messages, max_size=3),
    edit=st.none() | st.tuples(st.integers(0, 6), messages),
    changed=st.none() | tails,
    cut=st.none() | st.integers(1, 30),
    glue=st.sampled_from([b"", b",", b",]", b" "]),
)
def test_a_resent_tail_parses_to_what_a_full_parse_gives_and_is_last_turns_objects(
    first: dict[str, Any],
    tail: dict[str, Any],
    appended: list[dict[str, Any]],
    edit: tuple[int, dict[str, Any]] | None,
    changed: dict[str, Any] | None,
    cut: int | None,
    glue: bytes,
) -> None:
    """What follows the messages (tools, parameters) resent byte for byte is not parsed again: the body is still
    exactly a full parse's (values, types, key order), its objects are last turn's, and a body that only looks
    alike (cut short, a stray comma or bracket before the tail, a changed tail) goes the usual way."""
    parser = IncrementalParser()
    opening = {k: v for k, v in first.items() if k != "messages"}
    parsed_first = first_turn(parser, orjson.dumps({**opening, "messages": first["messages"], **tail}))
    history = [*first["messages"], *appended]
    if edit is not None and edit[0] < len(history):
        history[edit[0]] = edit[1]
    entries = tail if changed is None else changed
    start = orjson.dumps({**opening, "messages": []})[:-2]  # up to and with the array's "["
    rest = b"," + orjson.dumps(entries)[1:] if entries else b"}"
    # glue: bytes that break the array just before the tail, which both parsers must see alike
    raw = start + orjson.dumps(history)[1:-1] + glue + b"]" + rest
    if cut is not None:
        raw = raw[:-cut]
    parsed = parses_like_a_full_parse(parser, raw, parsed_first)
    if parsed is None:
        return
    body, reused = parsed
    if changed is None and not glue and cut is None and reused == len(first["messages"]) and tail:
        assert all(body[k] is parsed_first[k] for k in tail), "an unchanged tail is last turn's objects"


def test_a_tail_that_repeats_a_key_of_the_opening_is_parsed_every_time() -> None:
    """A full parse keeps a repeated key at its first place with its last value: such a tail is never stood in for."""
    parser = IncrementalParser()
    hi = b"hi, " * 30  # past the bytes that group a body's entries
    raw = b'{"model":"a","messages":[{"role":"user","content":"' + hi + b'"}],"model":"b","tools":[]}'
    first = first_turn(parser, raw)
    assert first["model"] == "b"
    again = raw.replace(hi + b'"}]', hi + b'"},{"role":"user","content":"and?"}]')
    body, reused = parser.parse(again, "caller")
    assert reused == 1 and body == orjson.loads(again)
    assert orjson.dumps(body) == orjson.dumps(orjson.loads(again))
