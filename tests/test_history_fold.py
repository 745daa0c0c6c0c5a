"""Answers remembered per chunk of history equal the answers of a plain walk, turn after turn.

A session is replayed the way ``sessions.resent`` hands it to the passes: each turn keeps
last turn's message objects and appends, replaces or drops some. After every turn each
chunk-folded question (system and user indices, token counts, called tools, the budget
report, prefix blocks, tool-pairing validation from a known-valid start) must give what a
walk of the whole history gives.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gateway.api.validate import validate_chat_request
from gateway.assembly import budget_report as budget
from gateway.assembly.budget_report import budget_report
from gateway.assembly.context import Context, Env, SessionState
from gateway.assembly.lint_context import _reminder_index, _summary_index
from gateway.assembly.message_text import system_indices, user_indices
from gateway.assembly.prefix import PrefixBlock, cacheable_tokens, prefix_blocks, track_prefix
from gateway.assembly.render_reminder import parse_reminder
from gateway.assembly.tool_required import called_names as _called_names
from gateway.assembly.verify_assembly import client_user_indices, is_gateway_block, last_client_user
from gateway.errors import RequestError
from gateway.history_fold import CHUNK, chunks
from gateway.tokens import counter_for

Message = dict[str, Any]

_TEXT = st.text(st.sampled_from("abcdef xyz.\n"), max_size=30)


@st.composite
def message(draw: st.DrawFn, n: int) -> list[Message]:
    """One message, or an assistant call with its results (kept together, as clients send them)."""
    kind = draw(
        st.sampled_from(["system", "developer", "user", "assistant", "calls", "reminder", "summary", "documents"])
    )
    text = f"{kind} {n} " + draw(_TEXT)
    if kind == "calls":
        ids = [f"call_{n}_{k}" for k in range(draw(st.integers(1, 2)))]
        name = draw(st.sampled_from(["lookup", "search", "fetch"]))
        calls = [{"id": i, "type": "function", "function": {"name": name, "arguments": "{}"}} for i in ids]
        return [{"role": "assistant", "content": None, "tool_calls": calls}] + [
            {"role": "tool", "tool_call_id": i, "content": text} for i in ids
        ]
    if kind == "reminder":
        return [{"role": "user", "content": f"<reminder>\nnow: {n}\n</reminder>"}]
    if kind in ("summary", "documents"):
        return [{"role": "user", "content": f"<{kind}>{text}</{kind}>"}]
    return [{"role": kind, "content": text}]


@st.composite
def history(draw: st.DrawFn, start: int, size: int) -> list[Message]:
    out: list[Message] = []
    while len(out) < size:
        out += draw(message(start + len(out)))
    return out


#: What a turn does to the resent history: append, change one message in place, drop the first.
EDITS = st.sampled_from(["append", "append", "append", "replace", "drop_first", "same"])


def _next_turn(draw: st.DrawFn, messages: list[Message], turn: int) -> list[Message]:
    edit = draw(EDITS)
    if edit == "append" or not messages:  # an emptied history can only grow again
        return messages + draw(history(1000 * turn, draw(st.integers(1, 5))))
    if edit == "replace":
        i = draw(st.integers(0, len(messages) - 1))
        if messages[i].get("role") in ("tool", "assistant"):
            return messages  # keep pairs whole
        return [*messages[:i], {**messages[i], "content": f"edited {turn}"}, *messages[i + 1 :]]
    if edit == "drop_first":  # never the last message: a request always has one
        return messages[1:] if len(messages) > 1 and messages[0].get("role") not in ("tool",) else messages
    return messages


def _ctx(messages: list[Message], previous: tuple[str, ...] = ()) -> Context:
    env = Env(counter=counter_for("o200k_base").for_request(), context_window=128_000, model="gpt-4o-mini")
    session = SessionState("s", previous_prefix=previous)
    return Context(messages=tuple(messages), tools=None, params={}, env=env, session=session)


def _reference_budget(ctx: Context) -> dict[str, int]:
    """The budget report's message components the way it computed them before chunks: one walk."""
    counter, messages = ctx.env.counter, ctx.messages
    last = max((i for i, m in enumerate(messages) if m.get("role") == "user" and not is_gateway_block(m)), default=-1)
    tail = budget._trailing_tool_results(messages)
    out: dict[str, int] = {}
    for i, m in enumerate(messages):
        kind = budget._kind(m) or ("query" if i == last or i >= tail else "history")
        out[kind] = out.get(kind, 0) + counter.message(m)
    return out


def _reference_shared(blocks: tuple[PrefixBlock, ...], previous: tuple[str, ...]) -> int:
    shared = 0
    for block, key in zip(blocks, previous, strict=False):
        if block.key() != key:
            break
        shared += block.tokens
    return shared


def _check(messages: list[Message], previous: tuple[str, ...]) -> tuple[str, ...]:
    as_tuple = tuple(messages)
    for seq in (messages, as_tuple):
        assert system_indices(seq) == tuple(i for i, m in enumerate(seq) if m["role"] in ("system", "developer"))
        assert user_indices(seq) == tuple(i for i, m in enumerate(seq) if m["role"] == "user")
    assert _reminder_index(as_tuple) == tuple(
        i for i, m in enumerate(messages) if parse_reminder(m.get("content")) is not None
    )
    assert _summary_index(as_tuple) == tuple(
        i for i, m in enumerate(messages) if str(m.get("content") or "").startswith("<summary")
    )
    client_users = [i for i, m in enumerate(messages) if m["role"] == "user" and not is_gateway_block(m)]
    assert client_user_indices(as_tuple) == tuple(client_users)
    assert last_client_user(as_tuple) == (client_users[-1] if client_users else -1)
    counter = counter_for("o200k_base")
    assert counter.messages(messages) == sum(counter.message(m) for m in messages)
    called = {c["function"]["name"] for m in messages for c in m.get("tool_calls") or ()}
    assert _called_names(as_tuple) == called

    ctx = _ctx(messages, previous)
    report = budget_report(ctx)
    reference = _reference_budget(ctx)
    for line in report.lines:
        if line.component not in ("tools", "reserve"):
            expected = reference.get(line.component, 0) + (budget.REPLY_PRIMING if line.component == "query" else 0)
            assert line.tokens == expected, line.component

    prefix = track_prefix(ctx)
    blocks = prefix_blocks(_ctx([dict(m) for m in messages]))  # fresh objects: no memo shared
    assert prefix.blocks == blocks
    assert prefix.keys() == tuple(b.key() for b in blocks)
    components: dict[str, int] = {}
    for b in blocks:
        components[b.component] = components.get(b.component, 0) + b.tokens
    assert prefix.component_tokens() == components
    assert prefix.shared_tokens == _reference_shared(blocks, previous)
    assert prefix.predicted_cached_tokens == cacheable_tokens(prefix.shared_tokens)
    return prefix.keys()


@settings(max_examples=40, deadline=None)
@given(st.data())
def test_folded_answers_equal_a_full_walk_turn_after_turn(data: st.DataObject) -> None:
    messages = data.draw(history(0, data.draw(st.integers(1, 3 * CHUNK))))
    previous: tuple[str, ...] = ()
    for turn in range(1, 8):
        previous = _check(messages, previous)
        messages = _next_turn(data.draw, messages, turn)


def test_same_objects_at_the_same_place_are_the_same_chunks() -> None:
    messages = [{"role": "user", "content": f"m{i}"} for i in range(3 * CHUNK + 5)]
    first = chunks(messages)
    appended = chunks([*messages, {"role": "user", "content": "new"}])
    assert first[:3] == appended[:3]  # whole chunks found again
    assert first[3] is not appended[3]  # the last one holds the new message
    edited = [*messages]
    edited[CHUNK + 1] = {"role": "user", "content": "changed"}
    again = chunks(edited)
    assert (again[0], again[2]) == (first[0], first[2]) and again[1] is not first[1]
    copies = chunks([dict(m) for m in messages])  # equal but other objects: not the same chunks
    assert all(a is not b for a, b in zip(first, copies, strict=True))


def _call(i: int) -> list[Message]:
    call = {"id": f"c{i}", "type": "function", "function": {"name": "f", "arguments": "{}"}}
    return [
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": f"c{i}", "content": "r"},
    ]


def _outcome(messages: list[Message], known: int) -> str | None:
    try:
        validate_chat_request({"model": "m", "messages": messages}, max_messages=10_000, known_valid=known)
    except RequestError as exc:
        return exc.param
    return None


@pytest.mark.parametrize(
    "tail",
    [
        [{"role": "tool", "tool_call_id": "c9", "content": "late"}],  # answers the call still open
        [{"role": "tool", "tool_call_id": "nope", "content": "x"}],  # answers nothing
        [{"role": "user", "content": "too early"}],  # the open call has no result
        [{"role": "tool", "tool_call_id": "c9", "content": "r"}] * 2,  # answers it twice
    ],
)
def test_pairing_checked_from_a_known_start_agrees_with_a_full_check(tail: list[Message]) -> None:
    """The known-valid start ends with a call whose result is in the new part (or is missing)."""
    head: list[Message] = [{"role": "user", "content": "go"}]
    for i in range(40):
        head += _call(i)
    two_calls = {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {"id": "c8", "type": "function", "function": {"name": "f", "arguments": "{}"}},
            {"id": "c9", "type": "function", "function": {"name": "f", "arguments": "{}"}},
        ],
    }
    head += [two_calls, {"role": "tool", "tool_call_id": "c8", "content": "r"}]
    assert _outcome(head, 0) is None
    body = head + tail
    assert _outcome(body, len(head)) == _outcome(body, 0)
