"""Session identification: a clock or a request id in the system prompt keeps the same session."""

from __future__ import annotations

import uuid

from gateway.sessions.identify import MAX_SESSION_ID_LENGTH, client_session, identify_session, scope_session


def _messages(system: str, first_user: str = "Plan the migration.") -> list[dict[str, str]]:
    return [{"role": "system", "content": system}, {"role": "user", "content": first_user}]


def test_timestamp_and_request_id_in_the_system_prompt_keep_the_session() -> None:
    ids = {
        identify_session(
            None,
            "caller1",
            "gpt-4o-mini",
            _messages(
                f"Current time: 2026-11-29T10:{minute:02d}:00Z\nRequest ID: {uuid.uuid4()}\nYou plan migrations."
            ),
        )
        for minute in range(30)
    }
    assert len(ids) == 1


def test_a_different_system_prompt_or_first_goal_is_another_session() -> None:
    base = identify_session(None, "c", "m", _messages("You plan migrations."))
    assert identify_session(None, "c", "m", _messages("You write poems.")) != base
    assert identify_session(None, "c", "m", _messages("You plan migrations.", "Other goal")) != base
    assert identify_session(None, "other-caller", "m", _messages("You plan migrations.")) != base


def test_a_resent_opening_is_named_by_its_objects_and_only_the_same_objects_reuse_the_name() -> None:
    """An agent's next turn resends the previous turn's message objects: the name is found by them. Another
    caller or model with those objects, or another system message in front of the same user message, is named
    afresh, as its text says."""
    messages = _messages("You plan migrations.")
    first = identify_session(None, "c", "m", messages)
    resent = [*messages, {"role": "assistant", "content": "ok"}, {"role": "user", "content": "next"}]
    assert identify_session(None, "c", "m", resent) == first
    assert identify_session(None, "other", "m", resent) == identify_session(
        None, "other", "m", _messages("You plan migrations.")
    )
    assert identify_session(None, "other", "m", resent) != first
    assert identify_session(None, "c", "m2", resent) != first
    swapped = [{"role": "system", "content": "You write poems."}, messages[1]]  # the same user message object
    assert identify_session(None, "c", "m", swapped) == identify_session(None, "c", "m", _messages("You write poems."))
    assert identify_session(None, "c", "m", swapped) != first
    added = [messages[0], {"role": "system", "content": "Also: be brief."}, messages[1]]
    assert identify_session(None, "c", "m", added) != first
    assert identify_session(None, "c", "m", messages) == first  # its own entry again, after the others


def test_the_header_wins() -> None:
    assert identify_session(" abc ", "c", "m", _messages("x")) == "abc"


def test_a_client_that_names_its_session_keeps_it_headers_first_then_its_body_field() -> None:
    codex = {"session-id": "01a23bb2-55f9", "thread-id": "01a23bb2-55f9", "x-client-request-id": "r-1"}
    assert client_session(codex, "cache-key") == "01a23bb2-55f9"
    assert client_session({"session_id": "old-codex", "conversation_id": "c"}) == "old-codex"
    assert client_session({"x-session-id": "mine", "session-id": "codex"}) == "mine"
    assert client_session({}, None, "", "01a23bb2-prompt-cache-key") == "01a23bb2-prompt-cache-key"
    assert client_session({"session-id": "  "}) is None
    assert len(client_session({"session-id": "x" * 500}) or "") == 128


def test_long_names_that_differ_only_past_128_characters_stay_two_sessions_within_the_store_columns() -> None:
    run = "tau2-telecom-default/ft:gpt-4.1-2025-04-14:sierra:tau2-full-sft/[mobile_data_issue]bad_network|" * 2
    names = [identify_session(f"{run}-{w}", "c", "m", _messages("x")) for w in (16000, 8000)]
    assert names[0] != names[1] and all(len(n) <= MAX_SESSION_ID_LENGTH for n in names)
    assert all(n.startswith(run[:100]) for n in names), "the head keeps the name readable"
    assert client_session({"session-id": f"{run}-8000"}) == names[1]
    assert identify_session("short-name", "c", "m", _messages("x")) == "short-name"
    scoped = [scope_session("k" * 64, n) for n in names]
    assert scoped[0] != scoped[1] and all(len(s) <= MAX_SESSION_ID_LENGTH for s in scoped)
    assert scope_session("k1", "abc") == "k1/abc"
