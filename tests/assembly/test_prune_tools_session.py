"""prune_tools under the defaults: selected from the task, pruned only when it pays, searchable."""

from __future__ import annotations

from dataclasses import replace

from gateway.assembly.policy import Policy
from gateway.assembly.prune_tools import ToolPolicy, prune_tools
from gateway.assembly.tool_payoff import PLAN_KEY, payoff
from gateway.assembly.tool_scoring import tool_name
from gateway.assembly.tool_scoring.session_scores import tool_links
from tests.assembly.tool_fixtures import call, catalogue, make_ctx, tool, user

assert Policy  # imported first: policy.py gathers the pass policies
DEFAULT = ToolPolicy(min_tool_tokens=0)  # the catalogue is ~500 tokens: small enough to pass untouched


def test_a_small_tool_list_goes_through_untouched_by_default() -> None:
    ctx = make_ctx([user("What's the weather forecast in Paris?")], catalogue())
    out, decisions = prune_tools(ctx, ToolPolicy())
    assert out is ctx
    assert decisions[0].action == "kept_all" and "min_tool_tokens" in decisions[0].reason


def names(ctx) -> list[str]:
    return [tool_name(t) for t in ctx.tools]


def test_pruned_request_offers_find_tools_last() -> None:
    ctx = make_ctx([user("What's the weather forecast in Paris?")], catalogue())
    out, decisions = prune_tools(ctx, DEFAULT)
    assert names(out)[-1] == "find_tools" and "get_weather" in names(out)
    assert len(out.tools) < len(ctx.tools)
    pruned = next(d for d in decisions if d.action == "pruned")
    assert pruned.detail["find_tools"] is True and pruned.detail["plan"] == "prune"
    assert pruned.tokens_after == ctx.env.counter.tools(out.tools)
    assert out.session.extra[PLAN_KEY] == "prune"


def test_first_set_is_neither_a_change_nor_a_negative_saving() -> None:
    ctx = make_ctx([user("What's the weather forecast in Paris?")], catalogue())
    out, decisions = prune_tools(ctx, DEFAULT)
    changed = next(d for d in decisions if d.action == "tool_set_changed")
    assert changed.detail["first"] is True and out.session.tool_set_changes == 0
    assert changed.tokens_before == changed.tokens_after == 0  # never counted as a saving or a loss
    assert sum(d.tokens_before - d.tokens_after for d in decisions) > 0


def test_sends_everything_when_the_cache_makes_pruning_a_loss() -> None:
    """A long prompt and cached input at 10 %: one expected set change costs more than the saving."""
    history = [{"role": "system", "content": "You are a careful travel agent. " * 900}, user("Weather in Paris?")]
    ctx = make_ctx(history, catalogue())
    ctx = ctx.replace(env=replace(ctx.env, cache_price_ratio=0.1))
    out, decisions = prune_tools(ctx, DEFAULT)
    assert out.tools == ctx.tools
    assert [d.action for d in decisions] == ["kept_all"]
    assert decisions[0].detail["plan"] == "all" and decisions[0].detail["cost"] > decisions[0].detail["saving"]
    # decided once: a later, short request of the same session is not pruned either
    later = make_ctx([user("Weather in Paris?")], catalogue(), state=out.session)
    again, more = prune_tools(later, DEFAULT)
    assert again.tools == later.tools and more[0].detail == {"plan": "all"}


def test_payoff_counts_a_removed_token_at_the_cached_price() -> None:
    cheap = payoff(
        tool_tokens=1000,
        removed_tokens=600,
        prompt_tokens=4000,
        cache_ratio=0.1,
        horizon_turns=10,
        expected_changes=0.5,
    )
    full = payoff(
        tool_tokens=1000,
        removed_tokens=600,
        prompt_tokens=4000,
        cache_ratio=1.0,
        horizon_turns=10,
        expected_changes=0.5,
    )
    assert not cheap.pays and full.pays
    assert (cheap.saving, cheap.cost, full.saving, full.cost) == (600, 2750, 6000, 5000)


def test_a_tool_named_by_the_task_survives_a_turn_that_does_not_name_it() -> None:
    """The last message says nothing useful; the task (first user message) names the flight search."""
    history = [
        user("I need to search flights from Lima to Madrid on a date in May."),
        {"role": "assistant", "content": "Sure. Which day exactly?"},
        user("the 12th, please go ahead"),
    ]
    ctx = make_ctx(history, catalogue())
    session_out, _ = prune_tools(ctx, DEFAULT.model_copy(update={"max_tools": 2, "min_tools": 1}))
    turn_only = DEFAULT.model_copy(update={"max_tools": 2, "min_tools": 1, "session_scoring": False})
    turn_out, _ = prune_tools(ctx, turn_only)
    assert "search_flights" in names(session_out)
    assert "search_flights" not in names(turn_out)


def test_later_turns_grow_by_what_the_user_describes_not_by_score_when_find_tools_is_served() -> None:
    """Issue 34: a tool the newest user message describes is offered on that request; find_tools is for
    what selection missed. A later turn that describes none keeps the set byte for byte."""
    first_ctx = make_ctx([user("What's the weather forecast in Paris?")], catalogue())
    first, _ = prune_tools(first_ctx, DEFAULT)
    history = [
        user("What's the weather forecast in Paris?"),
        {"role": "assistant", "content": "Sunny."},
        user("Now translate this text into Spanish language"),
    ]
    ctx = make_ctx(history, catalogue(), state=first.session)
    out, decisions = prune_tools(ctx, DEFAULT)
    assert names(out) == [*names(first)[:-1], "translate_text", "find_tools"]
    vague = make_ctx([*history[:2], user("Thanks, and what else should I pack?")], catalogue(), state=first.session)
    kept, decisions = prune_tools(vague, DEFAULT)
    assert names(kept) == names(first)  # byte-stable: nothing asked for by name or description
    assert not [d for d in decisions if d.action == "tool_set_changed"]


def test_a_called_tool_joins_a_sticky_set_and_counts_one_change() -> None:
    first_ctx = make_ctx([user("What's the weather forecast in Paris?")], catalogue())
    first, _ = prune_tools(first_ctx, DEFAULT)
    assert "set_timer" not in names(first)
    history = [user("What's the weather forecast in Paris?"), *call("c1", "set_timer")]
    ctx = make_ctx(history, catalogue(), state=first.session)
    out, _ = prune_tools(ctx, DEFAULT)
    assert names(out)[-2:] == ["set_timer", "find_tools"]
    assert out.session.tool_set_changes == 1


def test_tools_of_one_namespace_or_one_id_belong_together() -> None:
    tools = [
        tool("github__create_issue", "Open an issue"),
        tool("github__list_repos", "List repositories"),
        tool("get_customer_by_phone", "Find a customer by phone number"),
        tool("get_bills", "Bills of a customer", customer_id="The customer's id"),
        tool("play_music", "Play a song"),
        tool("lookup_for_weatherapi", "Weather lookup"),
        tool("forecast_for_weatherapi", "Weather forecast"),
    ]
    links = tool_links(tools)
    assert links[0] == {1} and links[1] == {0}
    assert 2 in links[3] and 3 in links[2]
    assert links[4] == frozenset()
    assert links[5] == {6}


def test_client_tool_named_find_tools_turns_the_served_one_off() -> None:
    tools = [*catalogue(), tool("find_tools", "The client's own search")]
    ctx = make_ctx([user("What's the weather forecast in Paris?")], tools)
    out, decisions = prune_tools(ctx, DEFAULT)
    pruned = next(d for d in decisions if d.action == "pruned")
    assert "find_tools" not in pruned.detail and names(out).count("find_tools") <= 1
