"""Compaction inside agent loops: one task, then many tool rounds, with or without user messages.

Properties over random loops (parallel calls, failing summarisers, no user message,
several user turns): every forwarded list is valid for OpenAI and, after litellm's
translation, for Anthropic; the newest rounds go out byte for byte; nothing is reverted.
Examples: a 150-round loop stays inside a 16K window, compacts rarely (hysteresis), and a
``checkpoint_reused`` decision always means the same bytes as the previous turn.
"""

from __future__ import annotations

import itertools
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gateway.assembly.compaction_layout import layout, watermarks
from gateway.assembly.compaction_policy import DEFAULT_TARGET, CompactionPolicy
from gateway.assembly.context import Message
from gateway.assembly.pipeline import PASSES, Assembly, PassSpec, assemble
from gateway.assembly.verify_assembly import is_gateway_block
from gateway.config import parse_settings
from tests.assembly.compaction_helpers import (
    COUNTER,
    CountingSummarizer,
    make_ctx,
    policy,
    rewrites,
    run_turns,
    saved_state,
)
from tests.assembly.loop_helpers import (
    LOOP_SYSTEM,
    LOOP_TASK,
    agent_loop,
    anthropic_problems,
    loop_round,
    newest_round_as_sent,
    older_round_as_sent,
    openai_problems,
)


def _failing(messages: tuple[Message, ...], previous: str | None, max_tokens: int) -> str:
    raise ConnectionError("summariser unreachable")


_failing.name = "llm:failing"  # type: ignore[attr-defined]


@st.composite
def loops(draw: st.DrawFn) -> list[list[dict[str, Any]]]:
    """Steps of a loop: the head, then rounds with parallel calls, now and then a user turn or a chat reply."""
    if draw(st.booleans()):
        head: list[dict[str, Any]] = [{"role": "system", "content": f"{LOOP_SYSTEM}\n{LOOP_TASK}"}]
    else:
        head = [{"role": "system", "content": LOOP_SYSTEM}, {"role": "user", "content": LOOP_TASK}]
    steps = [head]
    for k in range(draw(st.integers(1, 60))):
        step = loop_round(
            k,
            parallel=draw(st.integers(1, 3)),
            words=draw(st.integers(8, 300)),
            argument_words=draw(st.sampled_from([0, 0, 120])),
        )
        extra = draw(st.integers(0, 12))
        if extra == 0:
            step = [{"role": "user", "content": f"Also check module {k} for ID-{k}77."}, *step]
        elif extra == 1:
            step = [*step, {"role": "assistant", "content": f"Round {k} done; file /repo/out_{k}.txt written."}]
        steps.append(step)
    return steps


def _prefixes(steps: list[list[dict[str, Any]]]) -> list[list[dict[str, Any]]]:
    out, acc = [], []
    for step in steps:
        acc = acc + step
        out.append(list(acc))
    return out[1:]


def _newest_rounds(history: list[dict[str, Any]], n: int) -> list[dict[str, Any]]:
    """What must go out verbatim: the newest ``n`` rounds; with no more rounds than that, from the last user turn."""
    starts = [i for i, m in enumerate(history) if m.get("role") == "assistant"]
    if len(starts) > n:
        return history[starts[-n] :]
    users = [i for i, m in enumerate(history) if m.get("role") == "user"]
    return history[users[-1] :] if users else history


def _same_but_condensed(sent: list[dict[str, Any]], wanted: list[dict[str, Any]], cleared: set[str]) -> bool:
    """The tail as sent: its older rounds the client's messages but for cleared results, condensed reasoning and
    stubbed arguments (the same calls, each still paired); its newest round verbatim (``newest_round_as_sent``)."""
    if len(sent) != len(wanted):
        return False
    starts = [i for i, m in enumerate(wanted) if m.get("role") == "assistant"]
    newest = starts[-1] if starts else len(wanted)
    older = all(older_round_as_sent(m, w, cleared) for m, w in zip(sent[:newest], wanted[:newest], strict=True))
    return older and newest_round_as_sent(sent[newest:], wanted[newest:], 4000)


@st.composite
def loop_policies(draw: st.DrawFn) -> dict[str, Any]:
    threshold = draw(st.sampled_from([0.3, 0.55, 0.8]))
    summary = draw(st.integers(60, 400))
    return {
        "threshold": threshold,
        "target": threshold * draw(st.sampled_from([0.5, 0.64, 1.0])),
        "keep_recent_rounds": draw(st.integers(1, 5)),
        "keep_recent_tokens": draw(st.sampled_from([None, 300])),
        "strategies": draw(
            st.sampled_from([["clear_tool_results", "summarize"], ["summarize"], ["clear_tool_results"]])
        ),
        "never_clear": draw(st.sampled_from([[], ["read_file"]])),
        "clear_tool_inputs": draw(st.booleans()),
        "summary_max_tokens": summary,
        "summarizer_input_tokens": summary + draw(st.integers(100, 3000)),
        "reuse_checkpoints": draw(st.booleans()),
    }


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(steps=loops(), pol=loop_policies(), which=st.sampled_from(["extractive", "failing", "counting"]))
def test_every_forwarded_loop_is_valid_for_openai_and_anthropic(steps: list, pol: dict, which: str) -> None:
    summarizer = {"extractive": None, "failing": _failing, "counting": CountingSummarizer()}[which]
    histories = _prefixes(steps)
    results = run_turns(histories, policy(**pol), window=4000, summarizer=summarizer)
    for history, result in zip(histories, results, strict=True):
        out = list(result.assembled.messages)
        assert COUNTER.request(out, None) <= 4000 or COUNTER.request(history, None) <= 4000, "never over the window"
        fallback = [d for d in result.decisions if d.action == "reverted"]
        assert not fallback or "over the" in fallback[0].reason, "only a plan over the window falls back"
        assert openai_problems(out) == []
        if not anthropic_problems(history):
            assert anthropic_problems(out) == []
        newest = _newest_rounds(history, pol["keep_recent_rounds"])
        cleared = {d.detail["tool_call_id"] for d in result.decisions if d.action == "cleared"}
        if not fallback:  # the fallback keeps the newest round only
            sent = out[len(out) - len(newest) :]
            assert _same_but_condensed(sent, newest, cleared), "older tail rounds condensed only; the newest verbatim"
        last = _newest_rounds(history, 1)
        assert out[len(out) - len(last) :] == last, "the newest round goes out byte for byte"
        assert out[0] == history[0], "the system prompt is never touched"
        summaries = [m for m in out if is_gateway_block(m) and str(m.get("content")).startswith("<summary")]
        assert len(summaries) <= 1


def _loop_run(rounds: int, window: int, **pol: Any) -> tuple[list[list[dict[str, Any]]], list[Assembly]]:
    histories = [agent_loop(n, task_in_system=True, words=160) for n in range(1, rounds + 1)]
    return histories, run_turns(histories, policy(**pol), window=window)


def test_a_single_task_loop_without_user_message_is_compacted() -> None:
    histories, results = _loop_run(150, 16_000)
    sent = [r.assembled.prompt_tokens() for r in results]
    per_round = COUNTER.messages(loop_round(0, words=160))
    assert max(sent) <= 0.55 * 16_000 + per_round, "never past the threshold by more than one round"
    actions = [d.action for r in results for d in r.decisions]
    assert "cleared" in actions and "compacted" in actions
    last = results[-1].assembled.messages
    assert last[0] == histories[-1][0], "the system prompt (with the task) is never touched"
    assert last[-2:] == tuple(histories[-1][-2:]), "the newest round goes out verbatim"
    assert [m.get("tool_call_id") for m in last[-8:]] == [m.get("tool_call_id") for m in histories[-1][-8:]]


def test_hysteresis_compacts_down_to_the_target_so_compactions_are_rare() -> None:
    histories, results = _loop_run(150, 16_000, strategies=["summarize"])
    compacted = [i for i, r in enumerate(results) if any(d.action == "compacted" for d in r.decisions)]
    assert compacted
    per_round = COUNTER.messages(loop_round(0, words=160))
    for i in compacted:
        assert results[i].assembled.prompt_tokens() <= DEFAULT_TARGET * 16_000 + per_round
    growth = (0.55 - DEFAULT_TARGET) * 16_000
    assert len(compacted) <= 1 + sum(COUNTER.messages(loop_round(0, words=160)) for _ in histories) / growth


def test_a_reused_checkpoint_is_byte_identical_to_the_previous_turn() -> None:
    _, results = _loop_run(120, 16_000, strategies=["summarize"])
    for prev, cur in itertools.pairwise(results):
        if any(d.action == "checkpoint_reused" for d in cur.decisions):
            summary = [m for m in cur.assembled.messages if str(m.get("content")).startswith("<summary")]
            before = [m for m in prev.assembled.messages if str(m.get("content")).startswith("<summary")]
            assert summary == before


def test_stubs_name_the_tool_its_arguments_and_keep_the_facts() -> None:
    _, results = _loop_run(60, 16_000, strategies=["clear_tool_results"])
    cleared = [d for r in results for d in r.decisions if d.action == "cleared"]
    assert cleared and all(d.detail["tool"] == "read_file" for d in cleared)
    last = results[-1].assembled.messages
    stubs = [m["content"] for m in last if str(m.get("content")).startswith("[result of ")]
    assert stubs[0].startswith('[result of read_file {"path": "/repo/src/mod_0_0.py"} cleared: ')
    assert "OBJ-00000" in stubs[0], "an id from the cleared result stays in its stub"
    assert any("error: ValueError: invalid date" in s for s in stubs), "the error line stays"
    for d in cleared:
        assert last[d.detail["round"]]["role"] == "assistant", "the decision names the round's assistant message"


def test_never_clear_keeps_those_tools_results() -> None:
    _, results = _loop_run(60, 16_000, strategies=["clear_tool_results"], never_clear=["read_file"])
    assert not [d for r in results for d in r.decisions if d.action == "cleared"]


def test_layout_of_a_loop_keeps_the_task_and_the_newest_rounds() -> None:
    messages = agent_loop(30)
    lay = layout(messages, CompactionPolicy(keep_recent_rounds=4), COUNTER)
    assert lay is not None and lay.head_end == 2
    assert messages[lay.tail_start]["role"] == "assistant"
    assert sum(1 for m in messages[lay.tail_start :] if m["role"] == "assistant") == 4


@pytest.mark.parametrize("threshold", [0.2, 0.9])
def test_a_threshold_alone_is_valid_and_moves_prepare_at_and_target(threshold: float) -> None:
    settings = parse_settings({"policy": {"compaction": {"threshold": threshold}}})
    c = settings.policy.compaction
    assert c.target < c.prepare_at < c.threshold == threshold


#: A support agent's head: its policy and tools are most of the window (tau2-bench's telecom agent is ~6.7K of 16K).
_TOPICS = ("line status", "data plan", "roaming", "billing cycle", "device settings", "network mode")
_ACTS = ("check", "confirm", "record", "explain", "verify", "escalate")
_POLICY_LINES = [
    f"Before you {a} the {t}, {b} the {u} with the customer."
    for a in _ACTS
    for t in _TOPICS
    for b in _ACTS
    for u in _TOPICS
][:440]
LARGE_HEAD = "\n".join([LOOP_SYSTEM, *_POLICY_LINES])


@pytest.mark.parametrize("prepare_ahead", [False, True])
def test_behind_a_large_head_each_compaction_lands_at_the_target(prepare_ahead: bool) -> None:
    """The head leaves less than the target-to-threshold band: the watermarks rise, and then every
    compaction lands at the raised target, so the history grows by the whole band before the next one.
    Before, the target rose only to the head, every compaction landed between target and threshold
    (head + newest rounds + summary), and clearing batches came on turns of their own."""
    head = [{"role": "system", "content": LARGE_HEAD}, {"role": "user", "content": LOOP_TASK}]
    steps = [loop_round(k, words=48) for k in range(220)]
    histories = [head + [m for step in steps[: n + 1] for m in step] for n in range(len(steps))]
    window, pol = 16_000, policy(threshold=0.55, target=0.35, keep_recent_rounds=4)
    assert COUNTER.messages(head) + (0.55 - 0.35) * window > 0.55 * window, "the head alone raises the watermarks"
    results = run_turns(histories, pol, window=window, prepare_ahead=prepare_ahead)
    changed = rewrites(results)
    growth = COUNTER.messages(histories[-1]) - COUNTER.messages(histories[0])
    assert changed and len(changed) <= growth / ((0.55 - 0.35) * window), "at most one rewrite per band of growth"
    for k in changed:
        ctx = results[k].original
        lay = layout(ctx.messages, pol.compaction, COUNTER)
        assert lay is not None
        target = watermarks(ctx, lay, pol.compaction).target
        assert results[k].assembled.prompt_tokens() <= target, f"turn {k} lands above the target"
        assert any(d.action == "compacted" for d in results[k].decisions), f"turn {k}: a clearing batch of its own"
    for history, result in zip(histories, results, strict=True):
        assert result.assembled.messages[-8:] == tuple(history[-8:]), "the newest four rounds go out verbatim"


def test_behind_a_head_past_the_cap_compactions_come_a_growth_step_apart() -> None:
    """The head alone is past 80 % of the window (tau2's system prompt and tools are 6.7K of 8K): the threshold
    rises to the head plus 80 % of what it leaves and the summary is priced to that room, so a compaction lands
    well under the threshold. Before, the threshold stopped at 80 % of the window, under the head itself: every
    turn was over it and compacted again (97 rewrites for 101 requests on tau2 at 8K; 56 for 60 turns here)."""
    window = 8_000
    lines = _POLICY_LINES * 2
    system = "\n".join([LOOP_SYSTEM, *lines])
    while COUNTER.text(system) > 0.83 * window:
        lines = lines[:-1]
        system = "\n".join([LOOP_SYSTEM, *lines])
    head = [{"role": "system", "content": system}, {"role": "user", "content": LOOP_TASK}]
    assert COUNTER.messages(head) > 0.8 * window, "the head alone is past the cap"
    steps = [loop_round(k, words=12) for k in range(60)]
    histories = [head + [m for step in steps[: n + 1] for m in step] for n in range(len(steps))]
    results = run_turns(histories, policy(), window=window)
    room = window - COUNTER.messages(head)
    growth = COUNTER.messages(histories[-1]) - COUNTER.messages(histories[0])
    changed = rewrites(results)
    assert changed and len(changed) <= growth / (0.25 * room), f"{len(changed)} rewrites for {growth} tokens of growth"
    assert all(r.assembled.prompt_tokens() <= window for r in results)
    for history, result in zip(histories, results, strict=True):
        assert result.assembled.messages[-8:] == tuple(history[-8:]), "the newest four rounds go out verbatim"


def _summary_end(messages: tuple[Message, ...]) -> int:
    return next(i for i, m in enumerate(messages) if str(m.get("content")).startswith("<summary")) + 1


@pytest.mark.parametrize("prepare_ahead", [False, True])
def test_checkpoint_reused_means_the_previous_turn_sent_the_same_compacted_part(prepare_ahead: bool) -> None:
    histories = [agent_loop(n, task_in_system=True, words=160) for n in range(1, 121)]
    results = run_turns(histories, policy(), window=16_000, prepare_ahead=prepare_ahead)
    reused = 0
    for prev, cur in itertools.pairwise(results):
        if any(d.action == "checkpoint_reused" for d in cur.decisions):
            reused += 1
            end = _summary_end(cur.assembled.messages)
            assert prev.assembled.messages[:end] == cur.assembled.messages[:end], "head and summary, byte for byte"
    assert reused > 20


@pytest.mark.parametrize("prepare_ahead", [False, True])
def test_the_kept_rounds_go_out_verbatim_whether_or_not_a_summary_was_prepared_ahead(prepare_ahead: bool) -> None:
    """The turn that crosses the threshold summarises the middle itself when no summary was prepared ahead
    (the preparation is slow under load): clearing kept rounds instead made what was forwarded depend on
    timing (the 16K loop end to end: a kept round's result cleared only when its machine was busy)."""
    histories = [agent_loop(n, words=240) for n in range(1, 81)]
    results = run_turns(histories, policy(keep_recent_rounds=4), window=16_000, prepare_ahead=prepare_ahead)
    for k, (history, result) in enumerate(zip(histories, results, strict=True)):
        kept = history[-2 * min(4, k + 1) :]
        assert list(result.assembled.messages[-len(kept) :]) == kept, f"round {k}: the kept rounds as the client sent"
    assert any(d.action == "compacted" for r in results for d in r.decisions)


def test_a_compacted_agent_loop_is_no_lint_error() -> None:
    """The summary of a loop's older rounds follows its only user message (the task): lint read that as the
    last user turn replaced, an ``error`` on every compacted turn, which strict lint would refuse with a 400."""
    histories = [agent_loop(n, words=240) for n in range(1, 61)]
    results = run_turns(histories, policy(), window=16_000)
    assert any(d.action == "compacted" for r in results for d in r.decisions)
    findings = [d.detail for r in results for d in r.decisions if d.action == "finding"]
    assert not [f for f in findings if f.get("check") == "compaction_edges"], findings[:1]


def _raises(ctx: Any, policy: Any) -> Any:
    raise RuntimeError("a broken pass")


def test_after_a_turn_that_went_out_without_the_summary_it_is_not_a_reuse() -> None:
    """A reverted turn forwards the client's request (it fits the window); its session still names the
    summary in use, but the provider did not see it: sending it again is a change of prefix, ``compacted``."""
    histories = [agent_loop(n, task_in_system=True, words=160) for n in range(1, 56)]
    assert COUNTER.messages(histories[-2]) < 16_000
    pol = policy(strategies=["summarize"])
    results = run_turns(histories[:-2], pol, window=16_000)
    assert any(d.action == "checkpoint_reused" for d in results[-1].decisions)
    state = saved_state(results[-1])
    broken = (PASSES[0], PassSpec("broken", _raises, lambda p: p.compaction), *PASSES[1:])
    reverted = assemble(make_ctx(histories[-2], window=16_000, state=state), pol, broken)
    assert reverted.reverted and not any(
        str(m.get("content")).startswith("<summary") for m in reverted.assembled.messages
    )
    after = assemble(make_ctx(histories[-1], window=16_000, state=saved_state(reverted)), pol)
    actions = [d.action for d in after.decisions if d.pass_name == "compact_history"]
    assert actions == ["compacted"], actions
    (d,) = [d for d in after.decisions if d.action == "compacted"]
    assert d.detail["resent"] is True and d.detail["summarizer_calls"] == 0
