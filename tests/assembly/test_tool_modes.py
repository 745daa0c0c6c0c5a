"""The cache-preserving modes: OpenAI allowed_tools and Anthropic defer_loading."""

from __future__ import annotations

from gateway.assembly.policy import Policy
from gateway.assembly.prune_tools import prune_tools
from gateway.assembly.tool_modes import TOOL_SEARCH_TOOL, effective_mode
from gateway.assembly.tool_scoring import tool_name
from tests.assembly.tool_fixtures import catalogue, legacy_policy, make_ctx, user

assert Policy  # imported first: policy.py gathers the pass policies
ALLOWED = legacy_policy(max_tools=3, min_tools=1, mode="allowed_tools")
DEFER = legacy_policy(max_tools=3, min_tools=1, modes={"anthropic": "defer_loading"})


def test_allowed_tools_keeps_the_full_list_and_restricts_the_choice() -> None:
    ctx = make_ctx([user("What's the weather in Paris?")], catalogue())
    out, decisions = prune_tools(ctx, ALLOWED)
    assert out.tools == ctx.tools
    choice = out.params["tool_choice"]
    assert choice["type"] == "allowed_tools" and choice["allowed_tools"]["mode"] == "auto"
    allowed = [t["function"]["name"] for t in choice["allowed_tools"]["tools"]]
    assert "get_weather" in allowed and len(allowed) == 3
    assert list(out.session.tool_set) == allowed
    pruned = next(d for d in decisions if d.action == "pruned")
    assert pruned.tokens_before == pruned.tokens_after and pruned.detail["mode"] == "allowed_tools"


def test_allowed_tools_keeps_required_required() -> None:
    ctx = make_ctx([user("What's the weather in Paris?")], catalogue(), tool_choice="required")
    out, _ = prune_tools(ctx, ALLOWED)
    assert out.params["tool_choice"]["allowed_tools"]["mode"] == "required"


def test_allowed_tools_leaves_a_named_choice_alone() -> None:
    named = {"type": "function", "function": {"name": "set_timer"}}
    ctx = make_ctx([user("What's the weather in Paris?")], catalogue(), tool_choice=named)
    out, decisions = prune_tools(ctx, ALLOWED)
    assert out.tools == ctx.tools and out.params == ctx.params
    assert decisions[-1].action == "kept_all"


def test_defer_loading_sends_every_tool_with_the_rest_deferred() -> None:
    ctx = make_ctx([user("What's the weather in Paris?")], catalogue(), provider="anthropic")
    out, decisions = prune_tools(ctx, DEFER)
    loaded = [t for t in out.tools if "function" in t and not t.get("defer_loading")]
    deferred = [t for t in out.tools if t.get("defer_loading")]
    assert [tool_name(t) for t in loaded] == list(out.session.tool_set)
    assert len(loaded) + len(deferred) == len(ctx.tools)
    assert out.tools[-1] == TOOL_SEARCH_TOOL
    assert out.tools[: len(loaded)] == tuple(loaded)
    pruned = next(d for d in decisions if d.action == "pruned")
    assert pruned.tokens_after == ctx.env.counter.tools(loaded)


def test_unsupported_mode_falls_back_to_pruning() -> None:
    assert effective_mode("defer_loading", "openai") == "prune"
    assert effective_mode("allowed_tools", "hosted_vllm") == "prune"
    ctx = make_ctx([user("What's the weather in Paris?")], catalogue(), provider="hosted_vllm")
    out, decisions = prune_tools(ctx, ALLOWED)
    assert len(out.tools) == 3 and "tool_choice" not in out.params
    assert "mode_fallback" in next(d for d in decisions if d.action == "pruned").detail


def test_litellm_turns_deferred_tools_into_anthropic_tool_search() -> None:
    """What Anthropic receives: litellm's own request translation, run offline on our output."""
    from litellm.llms.anthropic.chat.transformation import AnthropicConfig

    ctx = make_ctx([user("What's the weather in Paris?")], catalogue(), provider="anthropic")
    out, _ = prune_tools(ctx, DEFER)
    config = AnthropicConfig()
    model = "claude-sonnet-4-5"
    params = config.map_openai_params({"tools": list(out.tools)}, {}, model, drop_params=False)
    sent = config.transform_request(model, [{"role": "user", "content": "hi"}], params, {}, {})["tools"]
    loaded = [t["name"] for t in sent if "input_schema" in t and not t.get("defer_loading")]
    deferred = [t["name"] for t in sent if t.get("defer_loading") is True]
    assert loaded == list(out.session.tool_set)
    assert sorted(loaded + deferred) == sorted(tool_name(t) for t in ctx.tools)
    assert sent[-1] == {"type": "tool_search_tool_bm25_20251119", "name": "tool_search_tool_bm25"}
