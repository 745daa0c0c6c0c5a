"""prune_tools across turns: the set is reused byte for byte and only grows at the end."""

from __future__ import annotations

import orjson

from gateway.assembly.context import SessionState
from gateway.assembly.policy import Policy
from gateway.assembly.prune_tools import ToolPolicy, prune_tools
from gateway.assembly.tool_scoring import tool_name
from tests.assembly.tool_fixtures import call, catalogue, legacy_policy, make_ctx, user

POLICY = legacy_policy(max_tools=4, min_tools=2)
assert Policy  # imported first: policy.py gathers the pass policies


def turn(messages, state: SessionState, policy: ToolPolicy = POLICY, tools=None):
    ctx = make_ctx(messages, tools or catalogue(), state=state)
    return prune_tools(ctx.replace(session=state), policy)


def tools_bytes(ctx) -> bytes:
    return orjson.dumps(list(ctx.tools))


def test_same_set_is_forwarded_byte_identical_on_later_turns() -> None:
    history = [user("What's the weather in Paris?")]
    first, _ = turn(history, SessionState("s"))
    history += [{"role": "assistant", "content": "Sunny, 21C."}, user("thanks, sounds lovely")]
    second, decisions = turn(history, first.session)
    assert tools_bytes(second) == tools_bytes(first)
    assert [d.action for d in decisions] == ["pruned"]
    assert second.session.tool_set_changes == 0


def test_a_missing_relevant_tool_is_appended_at_the_end() -> None:
    first, _ = turn([user("What's the weather in Paris?")], SessionState("s"))
    before = [tool_name(t) for t in first.tools]
    history = [user("What's the weather in Paris?"), {"role": "assistant", "content": "Sunny."}]
    history.append(user("Now translate this text into Spanish language please"))
    second, decisions = turn(history, first.session)
    after = [tool_name(t) for t in second.tools]
    assert after[: len(before)] == before
    assert "translate_text" in after[len(before) :]
    change = next(d for d in decisions if d.action == "tool_set_changed")
    assert "translate_text" in change.detail["added"] and change.detail["removed"] == []
    assert second.session.tool_set_changes == 1
    assert second.session.tool_set == tuple(after)


def test_a_tool_called_later_joins_the_set() -> None:
    first, _ = turn([user("What's the weather in Paris?")], SessionState("s"))
    assert "set_timer" not in first.session.tool_set
    history = [user("What's the weather in Paris?"), *call("c1", "set_timer"), user("ok")]
    second, _ = turn(history, first.session)
    assert "set_timer" in [tool_name(t) for t in second.tools]


def test_without_stickiness_the_set_follows_each_turn() -> None:
    policy = POLICY.model_copy(update={"sticky": False})
    first, _ = turn([user("What's the weather in Paris?")], SessionState("s"), policy)
    second, _ = turn([user("What's the weather in Paris?"), user("play a song by Queen")], first.session, policy)
    assert "play_music" in second.session.tool_set
    assert second.session.tool_set_changes == 1
    assert set(second.session.tool_set) != set(first.session.tool_set) | {"play_music"}


def test_tools_the_client_stopped_offering_leave_the_set() -> None:
    first, _ = turn([user("What's the weather in Paris?")], SessionState("s"))
    gone = first.session.tool_set[0]
    offered = [t for t in catalogue() if tool_name(t) != gone]
    second, decisions = turn([user("What's the weather in Paris?")], first.session, tools=offered)
    assert gone not in second.session.tool_set
    change = next(d for d in decisions if d.action == "tool_set_changed")
    assert change.detail["removed"] == [gone]


def test_running_twice_changes_nothing() -> None:
    ctx = make_ctx([user("weather and news")], catalogue())
    once, _ = prune_tools(ctx, POLICY)
    twice, decisions = prune_tools(once, POLICY)
    assert twice.tools == once.tools
    assert twice.session == once.session
    assert [d.action for d in decisions] in (["pruned"], ["kept_all"])


def test_a_set_grown_past_max_set_tools_starts_again_from_this_turn() -> None:
    policy = POLICY.model_copy(update={"max_set_tools": 4})
    state = SessionState("s", tool_set=("send_email", "book_hotel", "play_music", "set_timer"), tool_set_changes=5)
    out, decisions = turn([user("What's the weather forecast in Paris?")], state, policy)
    fresh, _ = turn([user("What's the weather forecast in Paris?")], SessionState("new"), policy)
    assert out.session.tool_set == fresh.session.tool_set
    assert "get_weather" in out.session.tool_set
    assert out.session.tool_set_changes == 6
    change = next(d for d in decisions if d.action == "tool_set_changed")
    assert change.detail["removed"] and not change.detail["first"]
