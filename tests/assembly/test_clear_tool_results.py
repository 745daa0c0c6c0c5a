"""clear_tool_results: old results become stubs first; pairs, edges and cleared facts survive."""

from __future__ import annotations

import orjson

from gateway.assembly.clear_tool_results import clear_tool_results
from gateway.assembly.pipeline import assemble
from gateway.assembly.verify_assembly import tool_pairing_problems, verify_assembly
from tests.assembly.compaction_helpers import COUNTER, conversation, make_ctx, policy, run_turns, turn
from tests.assembly.loop_helpers import older_round_as_sent

BOTH = {"summary_max_tokens": 400, "keep_recent_turns": 2}


def _cleared(result) -> list:
    return [d for d in result.decisions if d.action == "cleared"]


def test_does_nothing_under_the_threshold() -> None:
    ctx = make_ctx(conversation(5))
    out, decisions = clear_tool_results(ctx, policy().compaction)
    assert out is ctx and decisions == []


def test_compaction_passes_step_aside_without_walking_a_history_under_the_threshold(monkeypatch) -> None:
    """Under the policy's threshold with nothing carried over, no pass locates head and tail (``layout``
    walks the whole history: three passes did on every turn of a long session far below its window)."""
    from gateway.assembly import clear_tool_results as ctr
    from gateway.assembly import compact_history as ch
    from gateway.assembly.compaction_layout import STATE_KEY, nothing_to_compact
    from gateway.assembly.context import SessionState

    def walked(*args: object) -> None:
        raise AssertionError("layout walked a request with nothing to compact")

    monkeypatch.setattr(ctr, "layout", walked)
    monkeypatch.setattr(ch, "layout", walked)
    ctx = make_ctx(conversation(5))
    compaction = policy(**BOTH).compaction
    for step in (ctr.clear_tool_results, ctr.condense_tail, ch.compact_history):
        out, decisions = step(ctx, compaction)
        assert out is ctx and decisions == []
    carried = SessionState(session_id="s-test", extra={STATE_KEY: {"cleared": ["call_0"]}})
    assert nothing_to_compact(ctx, compaction, compaction.threshold)
    assert not nothing_to_compact(make_ctx(conversation(5), state=carried), compaction, compaction.threshold)
    assert not nothing_to_compact(make_ctx(conversation(28)), compaction, compaction.threshold)


def test_clears_oldest_results_to_stubs_and_keeps_the_pairs() -> None:
    messages = conversation(28)
    ctx = make_ctx(messages)
    result = assemble(ctx, policy(**BOTH))
    cleared = _cleared(result)
    assert cleared, "over the threshold, tool results are cleared before anything is summarised"
    assert not [d for d in result.decisions if d.pass_name == "compact_history"]
    indices = [d.detail["message_index"] for d in cleared]
    assert indices == sorted(indices) and indices[0] == 4, "oldest first"
    out = result.assembled.messages
    for d in cleared:
        i = d.detail["message_index"]
        assert out[i]["content"].startswith("[result of search_docs cleared: ")
        assert out[i]["tool_call_id"] == messages[i]["tool_call_id"]
        assert d.tokens_after < d.tokens_before
    assert not tool_pairing_problems(out)
    assert verify_assembly(ctx, result.assembled, result.decisions) == []
    assert list(out[-8:]) == messages[-8:], "recent turns untouched"
    assert result.assembled.prompt_tokens() <= 0.45 * 8000 + COUNTER.messages(turn(0))


def test_the_stub_names_the_tool_and_its_size() -> None:
    messages = conversation(28)
    result = assemble(make_ctx(messages), policy(**BOTH))
    d = _cleared(result)[0]
    original = messages[d.detail["message_index"]]["content"]
    assert result.assembled.messages[d.detail["message_index"]]["content"] == (
        f"[result of search_docs cleared: {COUNTER.text(original):,} tokens]"
    )


def test_cleared_results_stay_cleared_on_the_next_turn() -> None:
    first, second = run_turns([conversation(28), conversation(29)], policy(**BOTH))
    a = {d.detail["message_index"] for d in _cleared(first)}
    b = {d.detail["message_index"] for d in _cleared(second)}
    assert a <= b, "sticky: a result cleared once is not restored, so the prefix stays stable"
    n = min(len(first.assembled.messages), len(second.assembled.messages)) - 10
    assert first.assembled.messages[:n] == second.assembled.messages[:n]


def test_gives_way_to_a_summary_when_clearing_cannot_reach_the_threshold() -> None:
    messages = conversation(120)
    messages[4] = {**messages[4], "content": "Result: customer account ACC-77121 migrated. " + "filler " * 80}
    result = run_turns([messages], policy(**BOTH))[0]
    assert not _cleared(result)
    assert [d.action for d in result.decisions] == ["compacted"]
    assert "ACC-77121" in result.assembled.messages[2]["content"]


def test_clearing_in_the_tail_keeps_the_checkpoint_reusable() -> None:
    histories = [conversation(n, result_words=150, fact="Note: " + "context words " * 60) for n in range(8, 80)]
    results = run_turns(histories, policy(**{**BOTH, "keep_recent_turns": 4, "target": 0.35}))  # room below it at 8K
    both = [r for r in results if _cleared(r) and any(d.action == "checkpoint_reused" for d in r.decisions)]
    assert both, "a reused summary and cleared results after it in the same request"
    for r in results:
        compacted = [d for d in r.decisions if d.action == "compacted"]
        summarised = {
            str(m.get("tool_call_id"))
            for d in compacted
            for m in r.original.messages[d.detail["start"] : d.detail["end"]]
            if m.get("role") == "tool"
        }
        cleared = {d.detail["tool_call_id"] for d in _cleared(r)}
        assert not summarised & cleared, "never clear results that the same request summarises"
    for r in both:
        assert not r.reverted and not tool_pairing_problems(r.assembled.messages)


def test_strategy_order_can_switch_clearing_off() -> None:
    result = assemble(make_ctx(conversation(28)), policy(**BOTH, strategies=["summarize"]))
    assert not _cleared(result)
    assert [d.action for d in result.decisions] == ["compacted"]


def _write_round(k: int, tool: str = "write_file") -> list[dict]:
    """A coding agent's round whose arguments (the file written) are larger than its result."""
    body = f"# module {k}\n" + "def handler(x):\n    return x + 1\n" * 40
    args = orjson.dumps({"path": f"/repo/src/mod_{k}.py", "content": body}).decode()
    call = {"id": f"call_{k}", "type": "function", "function": {"name": tool, "arguments": args}}
    return [
        {"role": "assistant", "content": f"Writing module {k}.", "tool_calls": [call]},
        {"role": "tool", "tool_call_id": f"call_{k}", "content": f"wrote /repo/src/mod_{k}.py: " + "ok " * 60},
    ]


def _write_loop(rounds: int, tool_of=lambda k: "write_file") -> list[dict]:
    head = [{"role": "system", "content": "You are a coding agent."}, {"role": "user", "content": "Refactor /repo."}]
    return head + [m for k in range(rounds) for m in _write_round(k, tool_of(k))]


def test_clear_tool_inputs_stubs_the_arguments_of_cleared_calls_only() -> None:
    messages = _write_loop(20, tool_of=lambda k: "read_plan" if k == 1 else "write_file")
    ctx = make_ctx(messages, window=16_000)
    pol = policy(strategies=["clear_tool_results"], clear_tool_inputs=True, never_clear=["read_plan"])
    result = assemble(ctx, pol)
    out = result.assembled.messages
    cleared = _cleared(result)
    tail = len(messages) - 8  # the newest four rounds: their calls keep their arguments
    assert cleared and all(d.detail.get("input_cleared") == (d.detail["round"] < tail) for d in cleared)
    assert not result.reverted and verify_assembly(ctx, result.assembled, result.decisions, keep_rounds=4) == []
    for d in [d for d in cleared if d.detail["round"] < tail]:
        call, original = out[d.detail["round"]]["tool_calls"][0], messages[d.detail["round"]]["tool_calls"][0]
        assert call["id"] == original["id"] and call["function"]["name"] == "write_file"
        stub = orjson.loads(call["function"]["arguments"])  # still JSON, for Anthropic's tool_use input
        assert stub["cleared"].startswith('{"path":"/repo/src/mod_') and stub["tokens"] > 300
    assert out[4] == messages[4], "never_clear tools keep their call's arguments as well as their result"
    # The tail's older rounds may lose their long arguments too (condense_tail: the same calls, ids and names);
    # the newest round never does.
    cleared_ids = {d.detail["tool_call_id"] for d in cleared}
    assert all(older_round_as_sent(m, w, cleared_ids) for m, w in zip(out[-8:-2], messages[-8:-2], strict=True))
    assert list(out[-2:]) == messages[-2:], "the newest round is never cleared"
    assert not tool_pairing_problems(out)
    inputs_off = assemble(ctx, policy(strategies=["clear_tool_results"], never_clear=["read_plan"]))
    assert [m for m in inputs_off.assembled.messages if m["role"] == "assistant"] == [
        m for m in messages if m["role"] == "assistant"
    ], "off by default: only results are cleared"
    assert result.assembled.prompt_tokens() < inputs_off.assembled.prompt_tokens()


def test_cleared_inputs_are_the_same_bytes_on_every_turn() -> None:
    histories = [_write_loop(n) for n in range(14, 24)]
    results = run_turns(histories, policy(strategies=["clear_tool_results"], clear_tool_inputs=True), window=16_000)
    stubbed = [r for r in results if any(d.detail.get("input_cleared") for d in r.decisions)]
    assert len(stubbed) >= 2
    first, later = stubbed[0].assembled.messages, stubbed[-1].assembled.messages
    for i, m in enumerate(first):
        if m["role"] == "assistant" and m != histories[0][i]:
            assert later[i] == m, "a call stubbed once is sent with the same arguments afterwards"
