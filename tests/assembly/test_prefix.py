"""The prefix tracker predicts the provider's cache hit and names the component that broke it.

Conversations come from the real ToolBench runs in tests/data; the "provider" is the
project's simulator cache (OpenAI's documented rule), fed the same token sequence.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gateway.assembly.context import Context, Env, SessionState
from gateway.assembly.prefix import (
    cacheable_tokens,
    compare_prefix,
    component_of,
    prefix_blocks,
    prefix_keys,
    prompt_tokens,
    track_prefix,
)
from gateway.providersim.cache import PrefixCache, prompt_token_ids
from gateway.tokens import TokenCounter, counter_for
from tests.shared_data import data_rows

COUNTER = counter_for("o200k_base")


RUNS = data_rows("toolbench.jsonl")


def _ctx(
    messages: Sequence[Mapping[str, Any]], tools: Sequence[Mapping[str, Any]] | None, previous: tuple[str, ...] = ()
) -> Context:
    env = Env(counter=COUNTER, context_window=128_000, model="gpt-4o-mini")
    state = SessionState(session_id="s", previous_prefix=previous)
    return Context(messages=tuple(messages), tools=tuple(tools) if tools else None, params={}, env=env, session=state)


def _long_system() -> dict[str, str]:
    rules = " ".join(f"Rule {i}: answer only about shipping container number {i * 7}." for i in range(160))
    return {"role": "system", "content": "You are a logistics assistant. " + rules}


def test_block_tokens_add_up_to_the_billed_prompt() -> None:
    for run in RUNS:
        ctx = _ctx(run["messages"], run["tools"])
        assert prompt_tokens(track_prefix(ctx)) == COUNTER.request(ctx.messages, ctx.tools)


def test_first_turn_predicts_nothing_and_breaks_nothing() -> None:
    report = track_prefix(_ctx([_long_system(), {"role": "user", "content": "hi"}], None))
    assert report.predicted_cached_tokens == 0
    assert report.break_component is None


def test_appended_turn_shares_the_whole_previous_request() -> None:
    first = [_long_system(), {"role": "user", "content": "Where is container 14?"}]
    previous = track_prefix(_ctx(first, None))
    second = [*first, {"role": "assistant", "content": "In Valencia."}, {"role": "user", "content": "And 21?"}]
    report = track_prefix(_ctx(second, None, previous.keys()))
    shared = sum(b.tokens for b in previous.blocks)
    assert report.shared_tokens == shared
    assert report.predicted_cached_tokens == cacheable_tokens(shared) > 0
    assert report.break_component is None


def test_trailing_reminder_replaced_is_not_a_break() -> None:
    reminder = {"role": "user", "content": "<reminder>\nnow: 10:01\n</reminder>"}
    first = [_long_system(), {"role": "user", "content": "Where is 14?"}, reminder]
    previous = track_prefix(_ctx(first, None))
    later = [*first[:2], {"role": "assistant", "content": "Valencia"}, {"role": "user", "content": "21?"}]
    report = track_prefix(
        _ctx([*later, {**reminder, "content": "<reminder>\nnow: 10:02\n</reminder>"}], None, previous.keys())
    )
    assert report.break_component is None
    assert report.shared_tokens == sum(b.tokens for b in previous.blocks[:2])


def test_changed_system_prompt_is_a_system_break() -> None:
    first = [_long_system(), {"role": "user", "content": "Where is 14?"}]
    previous = track_prefix(_ctx(first, None))
    edited = [{"role": "system", "content": first[0]["content"] + " Today is Tuesday."}, first[1]]
    report = track_prefix(_ctx(edited, None, previous.keys()))
    assert report.break_component == "system"
    assert report.shared_tokens == 0
    assert report.predicted_cached_tokens == 0


@pytest.mark.parametrize("run_index", [2, 3])
def test_removed_tool_is_a_tools_break(run_index: int) -> None:
    run = RUNS[run_index]
    previous = track_prefix(_ctx(run["messages"][:2], run["tools"]))
    report = track_prefix(_ctx(run["messages"][:4], run["tools"][:-2], previous.keys()))
    assert report.break_component == "tools"
    assert report.shared_tokens == sum(b.tokens for b in previous.blocks[: len(run["tools"]) - 2])


def test_history_replaced_by_summary_is_a_summary_break() -> None:
    history = [_long_system()]
    for i in range(6):
        history += [{"role": "user", "content": f"question {i}"}, {"role": "assistant", "content": f"answer {i}"}]
    previous = track_prefix(_ctx([*history, {"role": "user", "content": "next"}], None))
    compacted = [history[0], {"role": "user", "content": "<summary>answers 0-4</summary>"}, *history[-2:]]
    report = track_prefix(_ctx([*compacted, {"role": "user", "content": "next"}], None, previous.keys()))
    assert report.break_component == "summary"
    assert report.shared_tokens == previous.blocks[0].tokens


def test_edited_old_turn_is_a_history_break() -> None:
    run = RUNS[0]
    previous = track_prefix(_ctx(run["messages"], run["tools"]))
    edited = [dict(m) for m in run["messages"]]
    edited[1]["content"] = str(edited[1]["content"]) + " (edited)"
    report = track_prefix(_ctx(edited, run["tools"], previous.keys()))
    assert report.break_component == "history"


def test_reminder_inside_the_prefix_is_a_reminder_break() -> None:
    reminder = {"role": "user", "content": "<reminder>\nrule\n</reminder>"}
    first = [_long_system(), reminder, {"role": "user", "content": "Where is 14?"}]
    previous = track_prefix(_ctx(first, None))
    second = [_long_system(), {**reminder, "content": "<reminder>\nrule 2\n</reminder>"}, first[2]]
    assert track_prefix(_ctx(second, None, previous.keys())).break_component == "reminder"


def test_components_follow_the_gateway_markers() -> None:
    assert component_of({"role": "developer", "content": "x"}) == "system"
    assert component_of({"role": "user", "content": "<documents>\n</documents>"}) == "documents"
    assert component_of({"role": "user", "content": [{"type": "text", "text": "<summary>"}]}) == "history"
    assert component_of({"role": "tool", "content": "[result of search cleared]"}) == "history"


def test_shorter_request_is_a_break_named_by_what_disappeared() -> None:
    first = [_long_system(), {"role": "user", "content": "a"}, {"role": "assistant", "content": "b"}]
    previous = compare_prefix(prefix_blocks(_ctx(first, None)), ())
    report = compare_prefix(prefix_blocks(_ctx(first[:1], None)), previous.keys())
    assert report.break_component == "history"


_EDITS = st.sampled_from(["append", "append", "drop_tool", "edit_system", "edit_last_tool_result"])


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(run_index=st.integers(0, len(RUNS) - 1), cut=st.integers(2, 6), edit=_EDITS)
def test_prediction_never_exceeds_what_the_provider_caches(run_index: int, cut: int, edit: str) -> None:
    """predicted <= actual always; on a pure append the provider caches at most one step more."""
    run = RUNS[run_index]
    first_msgs, tools = run["messages"][:cut], run["tools"]
    second_msgs, second_tools = list(run["messages"][: cut + 2]), list(tools)
    system = {"role": "system", "content": _long_system()["content"]}
    first_msgs = [system, *first_msgs[1:]]
    second_msgs = [system, *second_msgs[1:]]
    if edit == "drop_tool" and len(second_tools) > 1:
        second_tools = second_tools[1:]
    elif edit == "edit_system":
        second_msgs[0] = {"role": "system", "content": system["content"] + " Be brief."}
    elif edit == "edit_last_tool_result":
        second_msgs = [m if m.get("role") != "tool" else {**m, "content": "cleared"} for m in second_msgs]
    cache = PrefixCache()
    cache.lookup_and_store(prompt_token_ids(COUNTER, first_msgs, tools))
    actual = cache.lookup_and_store(prompt_token_ids(COUNTER, second_msgs, second_tools))
    previous = track_prefix(_ctx(first_msgs, tools))
    report = track_prefix(_ctx(second_msgs, second_tools, previous.keys()))
    assert report.predicted_cached_tokens <= actual
    if report.break_component is None:
        assert actual - report.predicted_cached_tokens <= 128


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(run_index=st.integers(0, len(RUNS) - 1), cut=st.integers(2, 6), edit=_EDITS, keys_first=st.booleans())
def test_the_keys_named_before_the_forward_are_the_reports(
    run_index: int, cut: int, edit: str, keys_first: bool
) -> None:
    """``prefix_keys`` (before the forward, nothing counted) names the blocks ``track_prefix`` reports after
    the answer and the same break, whichever ran first in a gateway's memos."""
    run = RUNS[run_index]
    first, tools = [_long_system(), *run["messages"][1:cut]], list(run["tools"])
    second = [dict(m) for m in first] + [dict(m) for m in run["messages"][cut : cut + 2]]
    if edit == "drop_tool" and len(tools) > 1:
        tools = tools[1:]
    elif edit == "edit_system":
        second[0] = {"role": "system", "content": second[0]["content"] + " Be brief."}
    elif edit == "edit_last_tool_result":
        second = [m if m.get("role") != "tool" else {**m, "content": "cleared"} for m in second]
    env = Env(counter=TokenCounter("o200k_base"), context_window=128_000, model="gpt-4o-mini")  # fresh memos
    previous = prefix_keys(Context(tuple(first), tuple(run["tools"]), {}, env, SessionState("s")))
    ctx = Context(tuple(second * 9), tuple(tools), {}, env, SessionState("s", previous_prefix=previous.keys))
    if keys_first:
        named, report = prefix_keys(ctx), track_prefix(ctx)
    else:
        report, named = track_prefix(ctx), prefix_keys(ctx)
    assert named.keys == report.keys() == tuple(b.key() for b in report.blocks)
    assert named.break_component == report.break_component
    if edit == "append":
        assert named.break_component is None


def test_memoised_blocks_are_the_same_blocks_per_encoding() -> None:
    run = RUNS[1]
    first = prefix_blocks(_ctx(run["messages"], run["tools"]))
    again = prefix_blocks(_ctx([dict(m) for m in run["messages"]], run["tools"]))
    assert first == again
    other = Env(counter=counter_for("cl100k_base"), context_window=8_000, model="gpt-4")
    ctx = Context(messages=tuple(run["messages"]), tools=None, params={}, env=other, session=SessionState("s"))
    assert [b.tokens for b in prefix_blocks(ctx)] == [other.counter.message(m) for m in run["messages"]]


def test_the_block_memo_keeps_only_what_it_keys_on() -> None:
    """The memo keys on a message's canonical bytes; orjson's result holds a ~16 KB buffer for a
    1 KB message, so keeping it as the key held ~10x the memo's own accounting (221 MB of RSS
    after 100 fresh 105K-token conversations, against a 32 MB budget)."""
    import tracemalloc

    messages = [{"role": "user", "content": f"message {i} of a new conversation: " + "x" * 1400} for i in range(300)]
    # A counter of its own: the process-wide one holds every earlier test's counts in this worker, and its
    # cache's table, grown past a size by these 300 messages, was counted as kept (1.9 MB in full CI runs,
    # 0.6 MB alone). Only the gateway's own lines are counted, not another thread's allocations meanwhile.
    env = Env(counter=TokenCounter("o200k_base"), context_window=128_000, model="gpt-4o-mini")
    ctx = Context(messages=tuple(messages), tools=None, params={}, env=env, session=SessionState(session_id="s"))
    mine = [tracemalloc.Filter(True, "*/gateway/*")]
    tracemalloc.start()
    try:
        before = tracemalloc.take_snapshot().filter_traces(mine)
        blocks = prefix_blocks(ctx)
        after = tracemalloc.take_snapshot().filter_traces(mine)
    finally:
        tracemalloc.stop()
    kept = sum(stat.size_diff for stat in after.compare_to(before, "filename"))
    assert len(blocks) == 300
    assert kept < 3 * sum(len(str(m)) for m in messages), f"{kept} bytes kept for 300 messages of ~1.4 KB"
