"""The token counter: the fast path for plain messages agrees with the general one; unseen texts."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

import gateway  # noqa: F401  (offline tiktoken)
from gateway.tokens import IMAGE_TOKENS, TokenCounter, counter_for, message_overhead, message_pieces

_text = st.text(max_size=40)
_messages = st.fixed_dictionaries(
    {"role": st.sampled_from(["system", "user", "assistant", "tool"]), "content": st.one_of(st.none(), _text)},
    optional={
        "name": _text,
        "tool_call_id": _text,
        "tool_calls": st.lists(
            st.fixed_dictionaries(
                {
                    "id": _text,
                    "type": st.just("function"),
                    "function": st.fixed_dictionaries({"name": _text, "arguments": _text}),
                }
            ),
            max_size=2,
        ),
    },
)


def _general(counter: TokenCounter, message: dict[str, Any]) -> int:
    pieces, images = message_pieces(message)
    return message_overhead(message) + sum(counter.text(p) for p in pieces) + images * IMAGE_TOKENS


@settings(max_examples=200, deadline=None)
@given(_messages)
def test_message_count_equals_the_general_rendering(message: dict[str, Any]) -> None:
    counter = counter_for("o200k_base")
    assert counter.message(message) == _general(counter, message)


def test_missing_names_each_unseen_text_once_and_learn_counts_them() -> None:
    counter = TokenCounter("o200k_base")
    messages = [
        {"role": "user", "content": "a fresh sentence about tokens"},
        {"role": "user", "content": "a fresh sentence about tokens"},
    ]
    tools = [{"type": "function", "function": {"name": "lookup", "parameters": {"type": "object"}}}]
    missing = counter.missing(messages, tools)
    assert missing.count("a fresh sentence about tokens") == 1
    assert "user" in missing
    assert len(missing) == 3
    counter.learn(missing)
    assert counter.missing(messages, tools) == []
    assert counter.request(messages, tools) == TokenCounter("o200k_base").request(messages, tools)


@settings(max_examples=100, deadline=None)
@given(st.lists(_messages, max_size=6))
def test_request_counter_counts_what_the_shared_counter_counts(messages: list[dict[str, Any]]) -> None:
    shared = counter_for("o200k_base")
    per_request = shared.for_request()
    tools = [{"type": "function", "function": {"name": "f", "description": "d", "parameters": {}}}]
    assert per_request.request(messages, tools) == shared.request(messages, tools)
    assert per_request.request(messages, tools) == shared.request(messages, tools)  # the memoised answer
    assert per_request.for_request() is per_request


def test_request_counter_memo_is_by_object_not_by_equal_value() -> None:
    """A different object (a pass's rewritten message) is counted afresh, never given another's count."""
    per_request = counter_for("o200k_base").for_request()
    first = {"role": "user", "content": "short"}
    rewritten = {**first, "content": "a much longer content than before, with many more tokens in it"}
    assert per_request.message(first) < per_request.message(rewritten)
    assert per_request.message(first) == counter_for("o200k_base").message(first)
