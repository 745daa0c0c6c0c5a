"""ResentHistory: a resent conversation becomes last turn's objects, and nothing else changes."""

from __future__ import annotations

import copy
from typing import Any

import orjson

from benchmarks.profiles import build_profiles
from gateway.object_memo import ObjectMemo
from gateway.sessions.resent import ResentHistory
from gateway.store import writer
from gateway.store.writer import KnownContent, _Batch
from gateway.tokens import TokenCounter


def agent_body() -> dict[str, Any]:
    """A real agent request (the 37-message ToolBench-based benchmark profile), freshly parsed."""
    return orjson.loads(build_profiles(("agent14k",))[0].body)


def next_turn(body: dict[str, Any], *new: dict[str, Any]) -> dict[str, Any]:
    """The same conversation as the client resends it: parsed anew, with ``new`` messages appended."""
    resent = orjson.loads(orjson.dumps(body))
    resent["messages"].extend(copy.deepcopy(list(new)))
    return resent


def test_a_resent_history_is_last_turns_objects_and_the_same_bytes() -> None:
    history = ResentHistory()
    first = agent_body()
    assert history.adopt("s", first, 1000) == 0
    second = next_turn(first, {"role": "user", "content": "and now?"})
    sent = orjson.dumps(second)
    assert history.adopt("s", second, len(sent)) == len(first["messages"])
    assert all(a is b for a, b in zip(first["messages"], second["messages"], strict=False))
    assert second["tools"] is first["tools"]
    assert second["messages"][-1] == {"role": "user", "content": "and now?"}
    assert orjson.dumps(second) == sent, "the swap never changes what is forwarded"


def test_an_edited_message_is_not_swapped_and_the_others_still_are() -> None:
    history = ResentHistory()
    first = agent_body()
    history.adopt("s", first, 1000)
    second = next_turn(first)
    second["messages"][0] = {**second["messages"][0], "content": "You are an agent. Today is 2026-11-29."}
    second["tools"] = second["tools"][:-1]
    assert history.adopt("s", second, 1000) == len(first["messages"]) - 1
    assert second["messages"][0] is not first["messages"][0] and second["messages"][0]["content"].endswith("29.")
    assert all(a is b for a, b in zip(first["messages"][1:], second["messages"][1:], strict=True))
    assert second["tools"] is not first["tools"] and len(second["tools"]) == len(first["tools"]) - 1


def test_sessions_are_apart_and_bounded_by_count_and_bytes() -> None:
    history = ResentHistory(sessions=2, max_bytes=1000)
    a, b = agent_body(), agent_body()
    history.adopt("a", a, 400)
    assert history.adopt("b", next_turn(a), 400) == 0, "another session's history is not this one's"
    history.adopt("c", agent_body(), 400)  # over 1,000 bytes: the oldest session goes
    assert len(history) == 2 and history.adopt("a", next_turn(a), 400) == 0
    history.adopt("big", b, 5000)  # larger than the whole budget: not kept at all
    assert history.adopt("big", next_turn(b), 400) == 0


def test_object_memo_is_by_identity_and_bounded() -> None:
    memo: ObjectMemo[int] = ObjectMemo(limit=2)
    x, equal_to_x = {"role": "user", "content": "hi"}, {"role": "user", "content": "hi"}
    assert memo.get_or(x, lambda m: 1) == 1
    assert memo.get(x) == 1 and memo.get(equal_to_x) is None
    memo.put(equal_to_x, 2)
    memo.put([], 3)  # full: cleared whole, then this entry
    assert memo.get(x) is None and len(memo) == 1


def test_a_resent_turn_is_counted_and_hashed_only_where_it_is_new(monkeypatch: Any) -> None:
    history, counter, known = ResentHistory(), TokenCounter(), KnownContent()
    first = agent_body()
    history.adopt("s", first, 1000)
    counter.for_request().messages(first["messages"])
    batch = _Batch(known=known)
    batch.messages(first["messages"], 0.0)
    known.update([*batch.blobs, *batch.nodes])  # committed

    counted: list[Any] = []
    hashed: list[Any] = []
    real_count, real_json = TokenCounter.message, writer.canonical_json
    monkeypatch.setattr(TokenCounter, "message", lambda self, m: counted.append(m) or real_count(self, m))
    monkeypatch.setattr(writer, "canonical_json", lambda v: hashed.append(v) or real_json(v))
    new = {"role": "user", "content": "one more question"}
    second = next_turn(first, new)
    history.adopt("s", second, 1000)
    total = counter.for_request().messages(second["messages"])
    second_batch = _Batch(known=known)
    head, depth = second_batch.messages(second["messages"], 0.0)

    assert counted == [new] and hashed == [new]
    assert total == TokenCounter().messages(next_turn(first, new)["messages"])
    assert depth == len(second["messages"]) and list(second_batch.blobs) != []
    assert len(second_batch.nodes) == 1, "only the new message's node needs a row"
    fresh = _Batch()
    assert fresh.messages(next_turn(first, new)["messages"], 0.0)[0] == head, "same chain as a cold hash"
