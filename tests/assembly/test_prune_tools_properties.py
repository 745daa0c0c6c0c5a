"""Properties of prune_tools over generated requests: what must survive always survives."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from gateway.assembly.context import SessionState
from gateway.assembly.policy import Policy
from gateway.assembly.prune_tools import prune_tools
from gateway.assembly.tool_scoring import tool_name
from tests.assembly.tool_fixtures import CATALOGUE, call, catalogue, legacy_policy, make_ctx, user

assert Policy  # imported first: policy.py gathers the pass policies
NAMES = list(CATALOGUE)
WORDS = st.sampled_from(
    [
        "weather",
        "email",
        "flights",
        "hotel",
        "money",
        "stock",
        "translate",
        "calendar",
        "music",
        "food",
        "news",
        "timer",
        "the",
        "a",
    ]
)


@settings(max_examples=60, deadline=None)
@given(
    query=st.lists(WORDS, max_size=8).map(" ".join),
    called=st.lists(st.sampled_from(NAMES), max_size=3, unique=True),
    named=st.none() | st.sampled_from(NAMES),
    pinned=st.lists(st.sampled_from(NAMES), max_size=2, unique=True),
    max_tools=st.integers(1, 12),
    min_tools=st.integers(0, 6),
    budget=st.integers(1, 2_000),
    previous=st.lists(st.sampled_from([*NAMES, "retired_tool"]), max_size=6, unique=True),
)
def test_required_tools_survive_and_the_output_is_a_subset(
    query, called, named, pinned, max_tools, min_tools, budget, previous
) -> None:
    messages = [user("start")]
    for i, name in enumerate(called):
        messages += call(f"c{i}", name)
    messages.append(user(query))
    params = {"tool_choice": {"type": "function", "function": {"name": named}}} if named else {}
    state = SessionState("p", tool_set=tuple(previous))
    ctx = make_ctx(messages, catalogue(), state=state, **params)
    policy = legacy_policy(max_tools=max_tools, min_tools=min_tools, budget_tokens=budget, pinned=tuple(pinned))
    out, decisions = prune_tools(ctx.replace(session=state), policy)
    kept = [tool_name(t) for t in out.tools]
    assert set(called) | set(pinned) | ({named} if named else set()) <= set(kept)
    assert len(kept) >= min(max(min_tools, 1), len(NAMES))
    assert all(any(t is orig for orig in ctx.tools) for t in out.tools), "kept tools are the client's objects"
    assert len(set(kept)) == len(kept)
    assert "retired_tool" not in out.session.tool_set
    kept_prefix = [n for n in previous if n in NAMES]
    assert list(out.session.tool_set[: len(kept_prefix)]) == kept_prefix, "a sticky set only grows at the end"
    again, _ = prune_tools(out.replace(tools=ctx.tools).replace(session=out.session), policy)
    assert again.tools == out.tools, "a second run on the same turn changes nothing"
    assert all(d.pass_name == "prune_tools" for d in decisions)
