"""Anthropic's context editing through /v1/messages toward a model that does not do it (the simulator's
chat route): the gateway applies ``clear_tool_uses_20250919`` with its parameters and reports
``applied_edits`` as Anthropic does. The simulator's record is what the model read."""

from __future__ import annotations

from typing import Any

import anthropic
import orjson

from tests.procs import GatewayHandle, SimHandle


def _loop(uses: int) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = [{"role": "user", "content": "Find why the build fails."}]
    for n in range(uses):
        name = "run_tests" if n == 0 else "read_file"
        messages.append({"role": "assistant", "content": [
            {"type": "tool_use", "id": f"toolu_{n:02d}", "name": name, "input": {"path": f"src/m{n}.py"}}]})
        messages.append({"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": f"toolu_{n:02d}", "content": f"result {n}: " + "text " * 300}]})
    return messages


SCHEMA = {"type": "object", "properties": {"path": {"type": "string"}}}
TOOLS = [{"name": n, "description": f"{n} tool", "input_schema": SCHEMA} for n in ("run_tests", "read_file")]


def test_clear_tool_uses_is_applied_for_a_chat_upstream(default_gateway: GatewayHandle, sim: SimHandle) -> None:
    client = anthropic.Anthropic(base_url=default_gateway.url, api_key="sk-edits", max_retries=0)
    sim.reset()
    edit = {
        "type": "clear_tool_uses_20250919",
        "trigger": {"type": "tool_uses", "value": 3},
        "keep": {"type": "tool_uses", "value": 2},
        "exclude_tools": ["run_tests"],
        "clear_at_least": {"type": "input_tokens", "value": 500},
    }
    raw = client.messages.with_raw_response.create(
        model="gpt-4o-mini", max_tokens=64, messages=_loop(6), tools=TOOLS,  # type: ignore[arg-type]
        extra_body={"context_management": {"edits": [edit]}},
    )
    reply = orjson.loads(raw.http_response.content)
    applied = reply["context_management"]["applied_edits"]
    assert [a["type"] for a in applied] == ["clear_tool_uses_20250919"]
    assert applied[0]["cleared_tool_uses"] == 3 and applied[0]["cleared_input_tokens"] > 800
    received = sim.received()[-1]
    results = {m["tool_call_id"]: str(m["content"]) for m in received["messages"] if m["role"] == "tool"}
    assert results["toolu_00"].startswith("result 0"), "exclude_tools keeps run_tests"
    for n in (1, 2, 3):
        assert "cleared to save context" in results[f"toolu_{n:02d}"]
    for n in (4, 5):
        assert results[f"toolu_{n:02d}"].startswith(f"result {n}"), "keep: the newest two"
    assert "context_management" not in received


def test_an_unknown_edit_is_a_400_naming_it(default_gateway: GatewayHandle) -> None:
    client = anthropic.Anthropic(base_url=default_gateway.url, api_key="sk-edits", max_retries=0)
    try:
        client.messages.create(
            model="gpt-4o-mini", max_tokens=16, messages=_loop(1),  # type: ignore[arg-type]
            extra_body={"context_management": {"edits": [{"type": "clear_everything"}]}},
        )
    except anthropic.BadRequestError as exc:
        assert "context_management.edits[0].type" in str(exc)
    else:
        raise AssertionError("an unknown edit type must be refused")


def test_a_streamed_answer_reports_applied_edits_on_message_delta(
    default_gateway: GatewayHandle, sim: SimHandle
) -> None:
    """Anthropic reports the edits of a streamed answer on ``message_delta``; the SDK's beta stream folds them
    into the final message."""
    client = anthropic.Anthropic(base_url=default_gateway.url, api_key="sk-edits", max_retries=0)
    sim.reset()
    edit = {"type": "clear_tool_uses_20250919", "trigger": {"type": "tool_uses", "value": 3},
            "keep": {"type": "tool_uses", "value": 1}}
    with client.beta.messages.stream(
        model="gpt-4o-mini", max_tokens=64, messages=_loop(5), tools=TOOLS,  # type: ignore[arg-type]
        context_management={"edits": [edit]},  # type: ignore[list-item]
        betas=["context-management-2025-06-27"],
    ) as stream:
        deltas = [e for e in stream if e.type == "message_delta"]
        final = stream.get_final_message()
    assert len(deltas) == 1 and deltas[0].context_management is not None
    assert final.context_management is not None
    applied = final.context_management.applied_edits
    assert [a.type for a in applied] == ["clear_tool_uses_20250919"]
    assert applied[0].cleared_tool_uses == 4 and applied[0].cleared_input_tokens > 1000  # type: ignore[union-attr]
    received = sim.received()[-1]
    assert received["stream"] is True
    results = [str(m["content"]) for m in received["messages"] if m["role"] == "tool"]
    assert sum("cleared to save context" in r for r in results) == 4, "the model read the edited history"
