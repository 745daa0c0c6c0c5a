"""verify_assembly: a shrunk message is accepted only where a decision declares it."""

from __future__ import annotations

from typing import Any

from gateway.assembly.condense_reasoning import condensed_reasoning
from gateway.assembly.context import Context, Decision
from gateway.assembly.verify_assembly import is_gateway_block, shrunk_digest, verify_assembly
from gateway.tokens import counter_for
from tests.assembly.make_context import make_context

QUESTION = {"role": "user", "content": "Here is the report ... what is the total in section 4?"}
ORIGINAL = make_context({"messages": [{"role": "system", "content": "Be brief."}, QUESTION]})
CONDENSED = {"role": "user", "content": '<condensed strategy="chunk_and_extract">\n... section 4 ...\n</condensed>'}
COUNTER = counter_for("o200k_base")
DECLARED = Decision("shrink_oversize", "shrunk", detail={"shrunk_message": 1})


def _shrunk(message: dict[str, Any]) -> Context:
    return ORIGINAL.replace(messages=(ORIGINAL.messages[0], message))


def test_condensed_is_a_gateway_marker() -> None:
    assert is_gateway_block(CONDENSED)


def test_a_declared_shrunk_last_user_message_passes() -> None:
    assert verify_assembly(ORIGINAL, _shrunk(CONDENSED), [DECLARED]) == []


def test_an_undeclared_replacement_of_the_last_user_message_fails() -> None:
    problems = verify_assembly(ORIGINAL, _shrunk(CONDENSED), [])
    assert any("last user turn" in p for p in problems)


def test_a_declaration_for_another_message_does_not_excuse_this_one() -> None:
    elsewhere = Decision("shrink_oversize", "shrunk", detail={"shrunk_message": 0})
    problems = verify_assembly(ORIGINAL, _shrunk(CONDENSED), [elsewhere])
    assert any("last user turn" in p for p in problems)


def test_the_replacement_must_keep_the_role_and_be_a_marked_block() -> None:
    as_assistant = {**CONDENSED, "role": "assistant"}
    unmarked = {"role": "user", "content": "a silently rewritten question"}
    assert verify_assembly(ORIGINAL, _shrunk(as_assistant), [DECLARED])
    assert verify_assembly(ORIGINAL, _shrunk(unmarked), [DECLARED])


def _loop() -> list[dict[str, Any]]:
    call = {"id": "c1", "type": "function", "function": {"name": "bash", "arguments": '{"command": "ls"}'}}
    newest = {"id": "c2", "type": "function", "function": {"name": "bash", "arguments": '{"command": "pwd"}'}}
    return [
        {"role": "system", "content": "You are a coding agent."},
        {"role": "user", "content": "Task: fix it."},
        {"role": "assistant", "content": "I think the bug is in the parser. " * 40, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "c1", "content": "a.py b.py"},
        {"role": "assistant", "content": "Now check where I am.", "tool_calls": [newest]},
        {"role": "tool", "tool_call_id": "c2", "content": "/repo"},
    ]


def test_an_older_rounds_condensed_reasoning_keeps_its_calls_paired_where_declared() -> None:
    """An assistant message whose reasoning ``condense_tail`` condensed is a ``<condensed`` block that still
    carries its calls: the pairing check counts its calls (before, a gateway block was left out of the
    pairing, so its result looked orphaned), and it passes only where a decision declares it by digest."""
    messages = _loop()
    original = make_context({"messages": messages})
    made = condensed_reasoning(messages[2], COUNTER)
    assert made is not None and is_gateway_block(made) and made["tool_calls"] == messages[2]["tool_calls"]
    plan = original.replace(messages=(*original.messages[:2], made, *original.messages[3:]))
    declared = Decision("clear_tool_results", "condensed", detail={"shrunk_digest": shrunk_digest(messages[2])})
    assert verify_assembly(original, plan, [declared], keep_rounds=4) == []
    assert any("newest rounds" in p for p in verify_assembly(original, plan, [], keep_rounds=4))
    dropped = dict(made, tool_calls=[])
    unpaired = original.replace(messages=(*original.messages[:2], dropped, *original.messages[3:]))
    assert any("answers no preceding call" in p for p in verify_assembly(original, unpaired, [declared], keep_rounds=4))


def test_a_copy_of_a_declared_message_left_verbatim_still_passes() -> None:
    """A digest names every copy of a message: a chat repeats a reply byte for byte, and a pass that condensed
    the older copy left the newer one as the client sent it. Before, the check wanted a block in place of every
    copy, failed the plan, and the request fell back to a worse one."""
    messages = _loop()
    twice = [*messages[:4], messages[2], messages[3]]  # the newest round repeats the older one byte for byte
    original = make_context({"messages": twice})
    made = condensed_reasoning(messages[2], COUNTER)
    assert made is not None
    declared = Decision("clear_tool_results", "condensed", detail={"shrunk_digest": shrunk_digest(messages[2])})
    plan = original.replace(messages=(*original.messages[:2], made, *original.messages[3:]))
    assert verify_assembly(original, plan, [declared], keep_rounds=4) == []
