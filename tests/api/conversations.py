"""Hypothesis strategies for chat conversations, well-formed and not.

``valid_conversation`` alternates user and assistant turns, with tool calls answered by
their results; the ``hostile_*`` strategies break it in the ways clients actually do:
wrong roles, tool results without calls, huge or empty contents, odd unicode, nested
JSON in arguments, unknown fields, wrong types.
"""

from __future__ import annotations

import json
from typing import Any

from hypothesis import strategies as st

MODEL = "gpt-4o-mini"

#: Text a client may send: any code point except lone surrogates (not valid in UTF-8 JSON),
#: so zero-width joiners, RTL marks, NUL, combining marks and emoji are all in.
odd_text = st.text(st.characters(exclude_categories=["Cs"]), max_size=200)
ids = st.text("abcdefghijklmnopqrstuvwxyz0123456789_-", min_size=1, max_size=24)
json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**53), 2**53)
    | st.floats(allow_nan=False, allow_infinity=False)
    | odd_text,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(odd_text, inner, max_size=4),
    max_leaves=30,
)
unknown_fields = st.dictionaries(
    st.text("xyz_", min_size=3, max_size=10).map(lambda k: "x_" + k), json_values, max_size=3
)


@st.composite
def tool_exchange(draw: st.DrawFn) -> list[dict[str, Any]]:
    """An assistant message calling 1-3 tools, each answered by its tool result (nested JSON arguments)."""
    call_ids = draw(st.lists(ids, min_size=1, max_size=3, unique=True))
    calls = [
        {
            "id": cid,
            "type": "function",
            "function": {"name": draw(ids), "arguments": json.dumps(draw(json_values))},
        }
        for cid in call_ids
    ]
    results = [{"role": "tool", "tool_call_id": cid, "content": draw(odd_text)} for cid in call_ids]
    return [{"role": "assistant", "content": None, "tool_calls": calls}, *results]


@st.composite
def valid_conversation(draw: st.DrawFn, *, max_turns: int = 4) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = []
    if draw(st.booleans()):
        messages.append({"role": draw(st.sampled_from(["system", "developer"])), "content": draw(odd_text)})
    for _ in range(draw(st.integers(1, max_turns))):
        messages.append({"role": "user", "content": draw(odd_text)})
        if draw(st.booleans()):
            messages += draw(tool_exchange())
        messages.append({"role": "assistant", "content": draw(odd_text)})
    messages.append({"role": "user", "content": draw(odd_text)})
    return messages


def _hostile_message() -> st.SearchStrategy[Any]:
    role = st.sampled_from(["user", "assistant", "system", "tool", "developer", "function"]) | json_values
    content = st.one_of(
        odd_text,
        st.just(""),
        st.just("x" * 200_000),
        st.lists(st.fixed_dictionaries({"type": st.sampled_from(["text", "image_url", "nope"]), "text": json_values})),
        json_values,
    )
    extra = st.fixed_dictionaries(
        {},
        optional={
            "tool_call_id": json_values | ids,
            "tool_calls": json_values | st.lists(st.fixed_dictionaries({"id": ids, "function": json_values})),
            "name": json_values,
        },
    )
    base = st.fixed_dictionaries({"role": role, "content": content})
    return st.one_of(
        st.builds(lambda b, e, u: {**b, **e, **u}, base, extra, unknown_fields),
        json_values,
    )


@st.composite
def hostile_body(draw: st.DrawFn) -> Any:
    """A request body somewhere between valid and nonsense."""
    messages = draw(
        st.one_of(
            valid_conversation(),
            st.lists(_hostile_message(), max_size=6),
            st.builds(lambda v, h: [*v, *h], valid_conversation(max_turns=2), st.lists(_hostile_message(), max_size=3)),
            json_values,
        )
    )
    body: dict[str, Any] = {"model": draw(st.sampled_from([MODEL, MODEL, "", "no-such-model"]) | json_values)}
    if draw(st.integers(0, 9)) > 0:
        body["messages"] = messages
    optional = st.fixed_dictionaries(
        {},
        optional={
            "stream": st.booleans() | json_values,
            "temperature": st.floats(-1, 3, allow_nan=False) | json_values,
            "max_tokens": st.integers(-5, 10**6) | json_values,
            "tools": json_values
            | st.lists(
                st.fixed_dictionaries({"type": st.just("function"), "function": st.fixed_dictionaries({"name": ids})})
            ),
            "tool_choice": st.sampled_from(["auto", "none", "required"]) | json_values,
            "n": st.integers(-1, 3) | json_values,
        },
    )
    body.update(draw(optional))
    body.update(draw(unknown_fields))
    return body if draw(st.integers(0, 19)) > 0 else draw(json_values)
