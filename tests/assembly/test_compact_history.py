"""compact_history: the middle becomes one summary past the threshold; edges and pairs survive."""

from __future__ import annotations

import hashlib
from dataclasses import replace

import orjson
import pytest

from gateway.assembly.compact_history import compact_history
from gateway.assembly.compaction_layout import range_hash, summary_message
from gateway.assembly.compaction_policy import DEFAULT_TARGET
from gateway.assembly.context import Checkpoint, Message
from gateway.assembly.pipeline import assemble
from gateway.assembly.verify_assembly import tool_pairing_problems, verify_assembly
from tests.assembly.compaction_helpers import (
    COUNTER,
    HEAD,
    CountingSummarizer,
    conversation,
    make_ctx,
    policy,
    run_turns,
    turn,
)

SUMMARIZE_ONLY = {"strategies": ["summarize"], "summary_max_tokens": 400, "keep_recent_turns": 2}


def _decisions(result, action: str) -> list:
    return [d for d in result.decisions if d.action == action]


def test_leaves_a_request_under_the_threshold_untouched() -> None:
    ctx = make_ctx(conversation(3))
    out, decisions = compact_history(ctx, policy().compaction)
    assert out is ctx
    assert decisions == []


def test_replaces_the_middle_by_one_summary_at_its_place() -> None:
    messages = conversation(30)
    ctx = make_ctx(messages)
    assert ctx.prompt_tokens() > 0.55 * 8000
    result = assemble(ctx, policy(**SUMMARIZE_ONLY))
    out = list(result.assembled.messages)
    assert not result.reverted
    assert out[:2] == HEAD, "system prompt and first user message must stay as they were"
    assert out[2]["content"].startswith('<summary of="messages 2-')
    kept = len(out) - 3
    assert kept >= 8 and out[3:] == messages[-kept:], "at least the two most recent turns are kept verbatim"
    assert sum(1 for m in out if str(m.get("content") or "").startswith("<summary")) == 1
    assert verify_assembly(ctx, result.assembled, result.decisions) == []
    (decision,) = _decisions(result, "compacted")
    assert decision.detail["threshold"] == 0.55 and decision.detail["target"] == DEFAULT_TARGET
    assert decision.detail["start"] == 2 and decision.detail["end"] == len(messages) - kept
    assert decision.detail["tools"] == ["search_docs"] and decision.detail["round_count"] > 0
    assert decision.detail["summarizer_calls"] >= 1
    assert decision.tokens_after < decision.tokens_before
    assert result.assembled.prompt_tokens() <= DEFAULT_TARGET * 8000, (
        "hysteresis: down to the target, not just the threshold"
    )


def test_counts_tools_and_generation_reserve_in_the_trigger() -> None:
    messages = conversation(15)
    tokens = make_ctx(messages).prompt_tokens()
    assert tokens < 0.55 * 8000
    reserve = int(0.55 * 8000) - tokens + 1
    result = assemble(make_ctx(messages, params={"model": "m", "max_tokens": reserve}), policy(**SUMMARIZE_ONLY))
    assert _decisions(result, "compacted"), "max_tokens is reserved for the answer and counts toward the threshold"


def test_next_turn_reuses_the_stored_summary_byte_for_byte() -> None:
    base = conversation(30)
    summarizer = CountingSummarizer()
    first, second = run_turns([base, base + turn(30)], policy(**SUMMARIZE_ONLY), summarizer=summarizer)
    assert _decisions(first, "compacted")
    (reused,) = _decisions(second, "checkpoint_reused")
    assert reused.detail["summarizer_calls"] == 0 and reused.detail["reused"] is True
    assert second.assembled.messages[2] == first.assembled.messages[2]
    assert second.assembled.messages[: len(first.assembled.messages)] == first.assembled.messages
    assert summarizer.calls == first.decisions[-1].detail["summarizer_calls"]


def test_an_edited_range_is_summarised_again_not_reused() -> None:
    base = conversation(30)
    first = run_turns([base], policy(**SUMMARIZE_ONLY))[0]
    edited: list[Message] = [dict(m) for m in base]
    edited[5] = {**edited[5], "content": "Result 0: something else entirely, order 99812"}
    ctx = make_ctx(edited + turn(30), state=first.assembled.session)
    second = assemble(ctx, policy(**SUMMARIZE_ONLY))
    assert _decisions(second, "compacted") and not _decisions(second, "checkpoint_reused")
    assert "99812" in second.assembled.messages[2]["content"]


def test_a_summary_whose_text_changed_is_a_new_compaction_not_a_reuse() -> None:
    """Same range, other bytes (e.g. a better summary adopted for it): the prefix changes, so it counts."""
    base = conversation(30)
    first = run_turns([base], policy(**SUMMARIZE_ONLY))[0]
    state = first.assembled.session
    (cp,) = state.checkpoints
    better = replace(cp, summary=cp.summary + "\n- user: order 99812 was cancelled.")
    ctx = make_ctx(base + turn(30), state=replace(state, checkpoints=(better,)))
    second = assemble(ctx, policy(**SUMMARIZE_ONLY))
    (compacted,) = _decisions(second, "compacted")
    assert not _decisions(second, "checkpoint_reused")
    assert compacted.detail["summarizer_calls"] == 0 and "99812" in second.assembled.messages[2]["content"]
    third = assemble(make_ctx(base + turn(30) + turn(31), state=second.assembled.session), policy(**SUMMARIZE_ONLY))
    assert _decisions(third, "checkpoint_reused"), "the turn after sends the same new bytes: a reuse"


def test_summarizer_calls_grow_with_compactions_not_turns() -> None:
    summarizer = CountingSummarizer()
    histories = [conversation(n) for n in range(1, 121)]
    results = run_turns(histories, policy(**SUMMARIZE_ONLY), summarizer=summarizer)
    compactions = sum(len(_decisions(r, "compacted")) for r in results)
    reuses = sum(len(_decisions(r, "checkpoint_reused")) for r in results)
    assert compactions >= 2 and reuses > 5 * compactions
    assert summarizer.calls <= 2 * compactions
    assert summarizer.calls == sum(d.detail["summarizer_calls"] for r in results for d in _decisions(r, "compacted"))


@pytest.mark.parametrize("turns", [500])
def test_hierarchical_recompaction_keeps_500_turns_under_threshold(turns: int) -> None:
    per_turn = COUNTER.messages(turn(0))
    results = run_turns([conversation(n) for n in range(1, turns + 1)], policy(**SUMMARIZE_ONLY))
    sent = [r.assembled.prompt_tokens() for r in results]
    assert max(sent) <= 0.55 * 8000 + per_turn, "never more than the threshold plus the one new turn"
    assert sent[-1] <= 0.55 * 8000
    assert all(not r.reverted for r in results)
    last = results[-1].assembled.messages
    assert not tool_pairing_problems(last)
    assert COUNTER.text(last[2]["content"]) <= 400 + 40  # bounded summary (plus its tag)


def test_a_failing_summarizer_falls_back_to_extractive() -> None:
    def broken(messages: tuple[Message, ...], previous: str | None, max_tokens: int) -> str:
        raise TimeoutError("summariser timed out after 30s")

    broken.name = "llm:broken"  # type: ignore[attr-defined]
    messages = conversation(30, fact="Invoice INV-20931 is due 2026-04-30.")
    result = assemble(make_ctx(messages, summarizer=broken), policy(**SUMMARIZE_ONLY))
    (failed,) = _decisions(result, "summarizer_failed")
    assert "TimeoutError" in failed.detail["failures"][0]
    (compacted,) = _decisions(result, "compacted")
    assert compacted.detail["summarizer"] == "extractive"
    assert "INV-20931" in result.assembled.messages[2]["content"]


def test_a_summary_that_drops_the_facts_is_rejected() -> None:
    def lazy(messages: tuple[Message, ...], previous: str | None, max_tokens: int) -> str:
        return "The user and the assistant talked about several steps."

    lazy.name = "llm:lazy"  # type: ignore[attr-defined]
    messages = conversation(30)
    for k in range(3):  # stated in the older turns only: the rounds compaction keeps do not say it again
        messages[len(HEAD) + 4 * k]["content"] += " Server srv-4471 moved to /etc/billing/v2.yaml on 2026-02-11."
    result = assemble(make_ctx(messages, summarizer=lazy), policy(**SUMMARIZE_ONLY))
    (failed,) = _decisions(result, "summarizer_failed")
    assert "dropped" in failed.detail["failures"][0]
    summary = result.assembled.messages[2]["content"]
    assert "srv-4471" in summary and "/etc/billing/v2.yaml" in summary


def test_reuse_off_summarises_on_every_turn_over_the_threshold() -> None:
    summarizer = CountingSummarizer()
    pol = policy(**SUMMARIZE_ONLY, reuse_checkpoints=False)
    results = run_turns([conversation(n) for n in range(28, 34)], pol, summarizer=summarizer)
    assert all(_decisions(r, "compacted") for r in results)
    assert len({r.assembled.messages[2]["content"] for r in results}) == len(results)
    assert results[-1].assembled.session.checkpoints == ()


def test_a_system_message_in_the_middle_is_never_summarised() -> None:
    messages = [*conversation(12), {"role": "system", "content": "Policy update: be brief."}, *conversation(20)[2:]]
    result = assemble(make_ctx(messages), policy(**SUMMARIZE_ONLY))
    out = result.assembled.messages
    assert not result.reverted
    assert [m for m in out if m.get("role") == "system"] == [m for m in messages if m.get("role") == "system"]


def test_checkpoint_is_keyed_by_the_hash_of_its_range() -> None:
    messages = conversation(30)
    result = assemble(make_ctx(messages), policy(**SUMMARIZE_ONLY))
    (cp,) = result.assembled.session.checkpoints
    assert cp.range_hash == range_hash(messages[cp.start : cp.end])
    assert result.assembled.session.extra["compaction"]["active"] == cp.range_hash
    assert replace(cp, summary=cp.summary) == cp


def test_scripted_agent_keeps_planted_facts_under_the_threshold() -> None:
    from benchmarks.scripted_agent import TOOLS, facts_present, final_question, scripted_turns

    steps, facts = scripted_turns(turns=100, facts=20)
    steps[-1] = [*steps[-1], final_question(facts)]
    state, history = None, []
    summarizer = CountingSummarizer()
    compactions = 0
    for step in steps:
        history += step
        result = assemble(make_ctx(history, state=state, tools=TOOLS, summarizer=summarizer), policy())
        state = result.assembled.session
        compactions += len(_decisions(result, "compacted"))
        assert result.assembled.prompt_tokens() <= 0.55 * 8000 + COUNTER.messages(step)
        history.append({"role": "assistant", "content": "Noted, moving on to the next item."})
    final = [dict(m) for m in result.assembled.messages]
    assert facts_present(facts, final) >= 0.9, "the summary keeps the planted facts"
    assert compactions >= 1 and summarizer.calls <= 3 * compactions


def test_every_turn_of_a_compacted_session_sends_the_one_summary_object() -> None:
    """The summary stands for its checkpoint as one object, turn after turn, whatever loaded the checkpoint:
    later passes' memos (counts, transcript, prefix keys) then find it, and no pass may change it."""
    base = conversation(30)
    turns = run_turns([base, base + turn(30), base + turn(30) + turn(31)], policy(**SUMMARIZE_ONLY))
    sent = [t.assembled.messages[2] for t in turns]
    assert sent[0]["content"].startswith("<summary of=")
    assert sent[1] is sent[0] and sent[2] is sent[0]
    (cp,) = turns[-1].assembled.session.checkpoints
    loaded = Checkpoint(**cp.to_dict())  # as a session store hands it back: equal, not the same object
    assert summary_message(loaded) is sent[0]
    body = cp.summary
    assert sent[0] == {
        "role": "user",
        "content": f'<summary of="messages {cp.start}-{cp.end - 1}" by="{cp.summarizer}">\n{body}\n</summary>',
    }, "the pipeline left the shared message as it was made"
    other = summary_message(replace(loaded, summary=cp.summary + " and order 99812 was cancelled."))
    assert other is not sent[0] and "99812" in other["content"]


def test_range_hash_remembers_the_objects_and_still_follows_every_byte() -> None:
    def unremembered(messages: list[Message]) -> str:
        h = hashlib.sha256()
        for m in messages:
            h.update(hashlib.sha256(orjson.dumps(m, option=orjson.OPT_SORT_KEYS)).digest())
        return h.hexdigest()[:32]

    messages = [dict(m) for m in conversation(12)]
    key = range_hash(messages)
    assert key == unremembered(messages) == range_hash(tuple(messages))
    assert range_hash([dict(m) for m in messages]) == key, "equal messages in other objects: the same key"
    edited = [*messages[:5], {**messages[5], "content": "order 99812"}, *messages[6:]]
    assert range_hash(edited) == unremembered(edited) != key
    for n in range(50):  # objects made and dropped at once: a new object at a remembered id is not taken for it
        fresh = [{"role": "user", "content": f"message {n} {i}"} for i in range(3)]
        assert range_hash(fresh) == unremembered(fresh)
