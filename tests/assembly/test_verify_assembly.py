"""verify_assembly: the checks catch every unfaithful rewrite and accept the faithful ones."""

from __future__ import annotations

from typing import Any

from gateway.assembly.context import Context, Decision
from gateway.assembly.input_stubs import input_stub
from gateway.assembly.pipeline import PassSpec, assemble
from gateway.assembly.policy import Policy
from gateway.assembly.verify_assembly import comparable, shrunk_digest, verify_assembly
from tests.assembly.case_files import context_of

CALL = {
    "role": "assistant",
    "content": None,
    "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}],
}
RESULT = {"role": "tool", "tool_call_id": "c1", "content": "42"}


def _ctx(messages: list[dict[str, Any]]) -> Context:
    return context_of({"request": {"messages": messages}})


def _base() -> Context:
    return _ctx(
        [
            {"role": "system", "content": "Rules."},
            {"role": "user", "content": "first"},
            CALL,
            RESULT,
            {"role": "assistant", "content": "done"},
            {"role": "user", "content": "last"},
        ]
    )


def test_accepts_an_appended_reminder_and_cache_markers() -> None:
    ctx = _base()
    marked = {"role": "user", "content": [{"type": "text", "text": "last", "cache_control": {"type": "ephemeral"}}]}
    new = ctx.replace(messages=(*ctx.messages[:-1], marked, {"role": "user", "content": "<reminder>\nx\n</reminder>"}))
    assert verify_assembly(ctx, new, []) == []


def test_catches_a_tool_call_split_from_its_result() -> None:
    ctx = _base()
    new = ctx.replace(messages=tuple(m for m in ctx.messages if m is not RESULT))
    assert any("no result" in p for p in verify_assembly(ctx, new, []))


def test_catches_a_system_change_no_decision_declared() -> None:
    ctx = _base()
    new = ctx.replace(messages=({"role": "system", "content": "Other."}, *ctx.messages[1:]))
    assert verify_assembly(ctx, new, []) != []
    declared = Decision("move_volatile", "moved", detail={"changes_system": True})
    assert verify_assembly(ctx, new, [declared]) == []


def test_catches_an_edited_last_user_turn() -> None:
    ctx = _base()
    new = ctx.replace(messages=(*ctx.messages[:-1], {"role": "user", "content": "last, edited"}))
    assert any("verbatim" in p for p in verify_assembly(ctx, new, []))


def test_catches_an_unmarked_inserted_message() -> None:
    ctx = _base()
    new = ctx.replace(messages=(*ctx.messages[:2], {"role": "user", "content": "injected"}, *ctx.messages[2:]))
    assert any("neither the client's" in p for p in verify_assembly(ctx, new, []))


def _with_arguments(arguments: str, name: str = "f") -> dict[str, Any]:
    return {
        **CALL,
        "tool_calls": [{"id": "c1", "type": "function", "function": {"name": name, "arguments": arguments}}],
    }


def test_accepts_cleared_call_arguments_only_when_declared_and_stubbed() -> None:
    ctx = _base()
    declared = Decision("clear_tool_results", "cleared", detail={"round": 2, "input_cleared": True})
    stubbed = ctx.replace(messages=(*ctx.messages[:2], _with_arguments(input_stub("{}", 1)), *ctx.messages[3:]))
    assert verify_assembly(ctx, stubbed, [declared]) == []
    assert verify_assembly(ctx, stubbed, []) != [], "undeclared, a changed call is not the client's"
    for changed in (_with_arguments('{"x": 1}'), _with_arguments(input_stub("{}", 1), name="g")):
        edited = ctx.replace(messages=(*ctx.messages[:2], changed, *ctx.messages[3:]))
        assert verify_assembly(ctx, edited, [declared]) != [], "only a stub, with the call's id and name kept"


def test_a_broken_pass_is_reverted_and_recorded() -> None:
    def drop_results(ctx: Context, policy: Any) -> tuple[Context, list[Decision]]:
        return ctx.replace(messages=tuple(m for m in ctx.messages if m.get("role") != "tool")), []

    ctx = _base()
    result = assemble(ctx, Policy(), passes=(PassSpec("drop_results", drop_results, lambda p: p.volatile),))
    assert result.reverted and result.assembled is ctx
    assert result.decisions[-1].action == "reverted"
    assert result.decisions[-1].detail["problems"]


def test_comparable_reads_a_marked_single_part_as_the_string() -> None:
    marked = {"role": "system", "content": [{"type": "text", "text": "x", "cache_control": {"type": "ephemeral"}}]}
    assert comparable(marked) == {"role": "system", "content": "x"}
    image = {"type": "image_url", "image_url": {"url": "u"}}
    assert comparable({"role": "user", "content": [image]}) == {"role": "user", "content": [image]}


def test_protected_start_walks_back_over_the_kept_rounds_as_the_full_listing_did() -> None:
    """protected_start walks back from the end; it must agree with listing every assistant message."""
    import random

    from gateway.assembly.verify_assembly import last_client_user, protected_start

    def listed(messages: list[dict[str, Any]], keep_rounds: int | None) -> int:
        assistants = [i for i, m in enumerate(messages) if m.get("role") == "assistant"]
        rounds = assistants[-min(keep_rounds, len(assistants))] if assistants and keep_rounds else -1
        return max(last_client_user(messages), rounds)

    rng = random.Random(7)
    for _ in range(300):
        roles = [rng.choice(("system", "user", "assistant", "tool")) for _ in range(rng.randrange(0, 30))]
        messages: list[dict[str, Any]] = [{"role": r, "content": "x"} for r in roles]
        for keep in (None, 0, 1, 2, 4, 40):
            assert protected_start(messages, keep) == listed(messages, keep)


def _loop_round(k: int, script: str) -> list[dict[str, Any]]:
    call = {"id": f"c{k}", "type": "function", "function": {"name": "bash", "arguments": script}}
    return [
        {"role": "assistant", "content": f"Step {k}.", "tool_calls": [call]},
        {"role": "tool", "tool_call_id": f"c{k}", "content": f"ok {k}"},
    ]


def _stubbed(message: dict[str, Any], **function: str) -> dict[str, Any]:
    (call,) = message["tool_calls"]
    return {**message, "tool_calls": [{**call, "function": {**call["function"], **function}}]}


def test_a_tail_round_may_stand_condensed_with_its_calls_only_before_the_newest_round() -> None:
    """The lead's decision of session 38 (issue 34): an older round of the protected tail declared condensed may
    go out with its long arguments stubbed (ids and names kept); the newest round's calls never change."""
    script = '{"command": "cat > t.py << EOF\\n' + "assert f(1) == 1\\n" * 40 + 'EOF"}'
    messages = [{"role": "system", "content": "Rules."}, {"role": "user", "content": "Task."}]
    for k in range(3):
        messages += _loop_round(k, script)
    ctx = _ctx(messages)
    stub = input_stub(script, 200)

    def check(sent: list[dict[str, Any]], index: int) -> list[str]:
        detail = {"shrunk_digest": shrunk_digest(messages[index]), "input_cleared": True}
        decision = Decision("clear_tool_results", "condensed", 0, 0, "", detail)
        return verify_assembly(ctx, ctx.replace(messages=tuple(sent)), [decision], keep_rounds=3)

    older = list(messages)
    older[2] = _stubbed(messages[2], arguments=stub)
    assert check(older, 2) == []
    renamed = list(messages)
    renamed[2] = _stubbed(messages[2], arguments=stub, name="python")
    assert check(renamed, 2), "a condensed call keeps its tool's name"
    newest = list(messages)
    newest[6] = _stubbed(messages[6], arguments=stub)
    assert check(newest, 6), "the newest round's arguments stay the client's"
    assert verify_assembly(ctx, ctx.replace(messages=tuple(older)), [], keep_rounds=3), "only when declared"


def test_a_check_asks_its_questions_of_the_history_the_passes_already_cut_into_chunks(monkeypatch: Any) -> None:
    """The check read a fresh list of the client's messages, cut into chunks again for each question asked of it
    (twice a check, ~30-80 us at 287 messages); with nothing to make comparable it reads the context's own tuple,
    whose chunks the passes found. Fails if the check cuts the history again."""
    from gateway import history_fold
    from tests.assembly.make_context import make_context

    history: list[dict[str, Any]] = [{"role": "system", "content": "You are terse."}]
    for k in range(60):
        history += [{"role": "user", "content": f"question {k}"}, {"role": "assistant", "content": f"answer {k}"}]
    ctx = make_context({"messages": [*history, {"role": "user", "content": "the newest question"}]})
    history_fold.chunks(ctx.messages)  # as the passes before the check did
    cut: list[int] = []
    chunks_of = history_fold._chunks
    monkeypatch.setattr(history_fold, "_chunks", lambda messages: cut.append(len(messages)) or chunks_of(messages))
    plan = ctx.replace(messages=(*ctx.messages[:3], *ctx.messages[5:]))  # an older round left out
    assert verify_assembly(ctx, plan, []) == []
    assert cut == [], "the client's history is cut into chunks once, before the check"
