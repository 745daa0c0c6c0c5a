"""Finding: without ``X-Session-Id``, unrelated conversations of one key that open with the same
messages were merged into one session (two scripts both starting "Hello there").

A request belongs to the conversation whose messages it extends; two that diverge are two sessions,
each continued on its own, and a retry of the newest request stays where it was.
"""

from __future__ import annotations

from typing import Any

import openai

from gateway.sessions.conversations import ConversationIndex
from tests.procs import SimHandle

SYSTEM = {"role": "system", "content": "You are a helpful assistant."}
HELLO = {"role": "user", "content": "Hello there"}


def _turn(client: openai.OpenAI, messages: list[dict[str, Any]]) -> tuple[str, dict[str, Any]]:
    raw = client.chat.completions.with_raw_response.create(model="gpt-4o-mini", messages=messages)  # type: ignore[arg-type]
    answer = raw.parse().choices[0].message
    return raw.headers["x-ventana-session-id"], {"role": "assistant", "content": answer.content}


def test_two_scripts_that_open_alike_then_diverge_are_two_sessions(open_gateway: str, sim: SimHandle) -> None:
    client = openai.OpenAI(base_url=open_gateway + "/v1", api_key="sk-one-key", max_retries=0)
    a: list[dict[str, Any]] = [SYSTEM, HELLO]
    b: list[dict[str, Any]] = [SYSTEM, HELLO]
    a_session, reply = _turn(client, a)
    a += [reply, {"role": "user", "content": "Plan a trip to Lisbon in May."}]
    b_session, reply_b = _turn(client, b)
    assert b_session == a_session, "identical so far: nothing tells them apart yet"
    b += [reply_b, {"role": "user", "content": "Summarise the French revolution."}]
    a_next, reply = _turn(client, a)
    b_next, reply_b = _turn(client, b)
    assert a_next == a_session, "A extends its own history: the same session"
    assert b_next != a_session, "B diverged from A: a session of its own"
    a += [reply, {"role": "user", "content": "Which museums?"}]
    b += [reply_b, {"role": "user", "content": "And its causes?"}]
    assert _turn(client, a)[0] == a_session
    assert _turn(client, b)[0] == b_next, "B continues in its own session"
    assert _turn(client, b)[0] == b_next, "a retry of B's newest request stays in B's session"


def test_a_named_session_is_never_renamed(open_gateway: str, sim: SimHandle) -> None:
    client = openai.OpenAI(base_url=open_gateway + "/v1", api_key="sk-one-key", max_retries=0)
    for question in ("one", "two"):
        raw = client.chat.completions.with_raw_response.create(
            model="gpt-4o-mini",
            messages=[SYSTEM, HELLO, {"role": "assistant", "content": "Hi"}, {"role": "user", "content": question}],
            extra_headers={"X-Session-Id": "chosen-by-client"},
        )
        assert raw.headers["x-ventana-session-id"] == "chosen-by-client"


def test_the_index_is_per_caller_and_bounded() -> None:
    index = ConversationIndex(limit=4)
    opening = [SYSTEM, HELLO]
    assert index.name_local("caller-a", "s-open", opening) == "s-open"
    a2 = [*opening, {"role": "assistant", "content": "Hi"}, {"role": "user", "content": "A"}]
    assert index.name_local("caller-a", "s-open", a2) == "s-open"
    b2 = [*opening, {"role": "assistant", "content": "Hi"}, {"role": "user", "content": "B"}]
    assert index.name_local("caller-b", "s-open", b2) == "s-open", "another caller's history is not this one's"
    forked = index.name_local("caller-a", "s-open", b2)
    assert forked.startswith("s-open-") and forked != "s-open"
    for n in range(10):
        index.name_local("caller-c", f"s-{n}", [{"role": "user", "content": str(n)}])
    assert len(index._sessions) <= 4


def test_a_chain_taken_over_from_the_previous_turn_equals_one_hashed_whole() -> None:
    """The index hashes only a turn's new objects; what it finds must not depend on that shortcut."""
    index = ConversationIndex()
    first = [SYSTEM, HELLO, {"role": "assistant", "content": "Hi"}]
    second = [*first, {"role": "user", "content": "next"}]  # the same objects, one more message
    edited = [SYSTEM, {"role": "user", "content": "Hello there"}, {"role": "assistant", "content": "Hi!"}]
    for messages in (first, second, edited, second):
        assert index._chain("c", messages) == ConversationIndex()._chain("c", [dict(m) for m in messages])
