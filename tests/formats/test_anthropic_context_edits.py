"""Anthropic's context edits as the gateway applies them for upstreams without the feature:
the documented trigger, keep, clear_at_least, exclude_tools and clear_tool_inputs semantics."""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from gateway.errors import RequestError
from gateway.formats.anthropic_context_edits import CLEARED_RESULT, apply_context_edits
from gateway.tokens import counter_for

COUNTER = counter_for("cl100k_base")


def count(value: Any) -> int:
    return COUNTER.text(value if isinstance(value, str) else orjson.dumps(value).decode())


def loop(uses: int, *, result_words: int = 200, thinking: bool = False) -> dict[str, Any]:
    messages: list[dict[str, Any]] = [{"role": "user", "content": "Fix the failing test."}]
    for n in range(uses):
        name = "read_file" if n % 3 else "run_tests"
        blocks: list[dict[str, Any]] = []
        if thinking:
            blocks.append({"type": "thinking", "thinking": f"step {n}: " + "reason " * 40, "signature": f"sig{n}"})
        blocks.append({"type": "tool_use", "id": f"toolu_{n:02d}", "name": name, "input": {"path": f"src/m{n}.py"}})
        messages.append({"role": "assistant", "content": blocks})
        messages.append({"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": f"toolu_{n:02d}", "content": f"output {n} " + "line " * result_words}
        ]})
    return {"model": "m", "max_tokens": 100, "messages": messages}


def edits(*given: dict[str, Any]) -> dict[str, Any]:
    return {"context_management": {"edits": list(given)}}


def results(body: dict[str, Any]) -> dict[str, Any]:
    return {b["tool_use_id"]: b["content"] for m in body["messages"] if m["role"] == "user"
            for b in (m["content"] if isinstance(m["content"], list) else []) if b.get("type") == "tool_result"}


def test_under_the_trigger_nothing_is_cleared_and_the_field_is_removed() -> None:
    body = {**loop(6), **edits({"type": "clear_tool_uses_20250919"})}  # default trigger: 100,000 tokens
    out, applied = apply_context_edits(body, count)
    assert applied == [] and "context_management" not in out
    assert out["messages"] == body["messages"]


def test_keep_the_newest_uses_and_clear_the_rest_past_an_input_token_trigger() -> None:
    body = {**loop(8), **edits({"type": "clear_tool_uses_20250919", "trigger": {"type": "input_tokens", "value": 500},
                                "keep": {"type": "tool_uses", "value": 3}})}
    out, applied = apply_context_edits(body, count)
    got = results(out)
    cleared = [k for k, v in got.items() if v == [{"type": "text", "text": CLEARED_RESULT}]]
    assert cleared == [f"toolu_{n:02d}" for n in range(5)]
    assert all(str(got[f"toolu_{n:02d}"]).startswith(f"output {n}") for n in range(5, 8))
    assert applied[0]["type"] == "clear_tool_uses_20250919" and applied[0]["cleared_tool_uses"] == 5
    assert applied[0]["cleared_input_tokens"] > 5 * 150
    assert body["messages"][2]["content"][0]["content"].startswith("output 0"), "the input is not mutated"


def test_exclude_tools_and_clear_tool_inputs() -> None:
    body = {**loop(7), **edits({"type": "clear_tool_uses_20250919", "trigger": {"type": "tool_uses", "value": 2},
                                "keep": {"type": "tool_uses", "value": 1}, "exclude_tools": ["run_tests"],
                                "clear_tool_inputs": True})}
    out, applied = apply_context_edits(body, count)
    got = results(out)
    for n in range(6):
        is_cleared = got[f"toolu_{n:02d}"] == [{"type": "text", "text": CLEARED_RESULT}]
        assert is_cleared == (n % 3 != 0), n  # run_tests (n % 3 == 0) is never cleared
    inputs = {b["id"]: b["input"] for m in out["messages"] if m["role"] == "assistant" for b in m["content"]}
    assert inputs["toolu_01"] == {} and inputs["toolu_00"] == {"path": "src/m0.py"} and inputs["toolu_06"]
    assert applied[0]["cleared_tool_uses"] == 4


def test_clear_at_least_blocks_a_clearing_that_would_save_too_little() -> None:
    small = {"type": "clear_tool_uses_20250919", "trigger": {"type": "tool_uses", "value": 1},
             "keep": {"type": "tool_uses", "value": 2}, "clear_at_least": {"type": "input_tokens", "value": 5000}}
    out, applied = apply_context_edits({**loop(4, result_words=50), **edits(small)}, count)
    assert applied == [] and results(out)["toolu_00"].startswith("output 0")
    out, applied = apply_context_edits({**loop(4, result_words=3000), **edits(small)}, count)
    assert applied and applied[0]["cleared_tool_uses"] == 2


def test_clear_thinking_keeps_the_newest_turns() -> None:
    body = {**loop(4, thinking=True), **edits({"type": "clear_thinking_20251015",
                                                "keep": {"type": "thinking_turns", "value": 2}})}
    out, applied = apply_context_edits(body, count)
    with_thinking = [i for i, m in enumerate(out["messages"]) if m["role"] == "assistant"
                     and any(b["type"] == "thinking" for b in m["content"])]
    assert with_thinking == [5, 7]
    assert applied == [{"type": "clear_thinking_20251015", "cleared_thinking_turns": 2,
                        "cleared_input_tokens": applied[0]["cleared_input_tokens"]}]
    assert applied[0]["cleared_input_tokens"] > 60
    out, applied = apply_context_edits({**loop(4, thinking=True), **edits({"type": "clear_thinking_20251015",
                                                                            "keep": "all"})}, count)
    assert applied == []


@pytest.mark.parametrize(
    ("edit", "param"),
    [
        ({"type": "clear_everything"}, "context_management.edits[0].type"),
        ({"type": "clear_tool_uses_20250919", "keep": {"type": "tool_uses", "value": -1}},
         "context_management.edits[0].keep.value"),
        ({"type": "clear_tool_uses_20250919", "trigger": {"type": "minutes", "value": 3}},
         "context_management.edits[0].trigger"),
    ],
)
def test_a_malformed_edit_is_a_400_naming_the_field(edit: dict[str, Any], param: str) -> None:
    with pytest.raises(RequestError) as err:
        apply_context_edits({**loop(2), **edits(edit)}, count)
    assert err.value.param == param
