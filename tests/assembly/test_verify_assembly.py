"""verify_assembly: the checks catch every unfaithful rewrite and accept the faithful ones."""

from __future__ import annotations

from typing import Any

from gateway.assembly.context import Context, Decision
from gateway.assembly.input_stubs import input_stub
from gateway.assembly.pipeline import PassSpec, assemble
from gateway.assembly.policy import Policy
from gateway.assembly.verify_assembly import comparable, verify_assembly
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
