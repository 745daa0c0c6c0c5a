"""verify_assembly: a shrunk message is accepted only where a decision declares it."""

from __future__ import annotations

from typing import Any

from gateway.assembly.context import Context, Decision
from gateway.assembly.verify_assembly import is_gateway_block, verify_assembly
from tests.assembly.make_context import make_context

QUESTION = {"role": "user", "content": "Here is the report ... what is the total in section 4?"}
ORIGINAL = make_context({"messages": [{"role": "system", "content": "Be brief."}, QUESTION]})
CONDENSED = {"role": "user", "content": '<condensed strategy="chunk_and_extract">\n... section 4 ...\n</condensed>'}
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
