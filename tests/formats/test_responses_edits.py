"""responses_edits: what the passes decide on the chat view lands on the client's own Responses body."""

from __future__ import annotations

from typing import Any

from gateway.assembly.context import Env, SessionState
from gateway.assembly.move_volatile import VolatilePolicy, move_volatile
from gateway.assembly.render_reminder import ReminderPolicy, render_reminder
from gateway.assembly.request import context_from_body
from gateway.formats.responses import chat_body
from gateway.formats.responses_edits import apply_edits, sendable_item, view_of
from gateway.tokens import counter_for

CALL = {"type": "function_call", "id": "fc_1", "call_id": "call_1", "name": "shell", "arguments": '{"cmd":"ls"}'}
OUTPUT = {"type": "function_call_output", "id": "fco_1", "call_id": "call_1", "output": "a.txt\nb.txt", "status": "x"}
REASONING = {"type": "reasoning", "id": "rs_1", "summary": [], "encrypted_content": "opaque"}
TOOLS = [
    {"type": "function", "name": "shell", "parameters": {"type": "object"}, "strict": False},
    {"type": "function", "name": "view_image", "parameters": {"type": "object"}},
    {
        "type": "namespace",
        "name": "agents",
        "tools": [
            {"type": "function", "name": "spawn", "parameters": {"type": "object"}},
            {"type": "function", "name": "close", "parameters": {"type": "object"}},
        ],
    },
    {"type": "web_search"},
]


def _body(**extra: Any) -> dict[str, Any]:
    return {
        "model": "gpt-4o-mini",
        "instructions": "Be terse.",
        "input": [
            {"type": "message", "role": "developer", "content": [{"type": "input_text", "text": "Rules."}]},
            {"role": "user", "content": "list files"},
            REASONING,
            CALL,
            OUTPUT,
            {"type": "message", "role": "assistant", "id": "msg_9", "content": [{"type": "output_text", "text": "2"}]},
            {"role": "user", "content": "thanks"},
        ],
        "tools": TOOLS,
        "reasoning": {"effort": "high", "summary": "auto"},
        "include": ["reasoning.encrypted_content"],
        "store": False,
        "unknown": {"kept": True},
        **extra,
    }


def _apply(
    body: dict[str, Any], messages: list[Any] | None = None, tools: Any = None, params: Any = None, chat: Any = None
) -> Any:
    """The chat view of ``body`` (``chat``, when the test already built it) and the body the edits give."""
    chat = chat or chat_body(body, body["input"])
    view = view_of(body, body["input"], chained=False)
    original = chat["messages"]
    original_tools = chat["tools"]
    params0 = {k: v for k, v in chat.items() if k not in ("messages", "tools")}
    return chat, apply_edits(
        view,
        original,
        original if messages is None else messages,
        original_tools,
        original_tools if tools is None else tools,
        params0,
        params0 if params is None else {**params0, **params},
        "gpt-4o-mini-2024",
    )


def test_nothing_edited_is_the_client_body_with_the_provider_model_id() -> None:
    body = _body()
    _, out = _apply(body)
    assert out == {**body, "model": "gpt-4o-mini-2024"}
    assert out["input"] is body["input"] and out["tools"] is body["tools"]


def test_a_stubbed_tool_result_keeps_its_item_and_changes_only_its_output() -> None:
    chat, _ = _apply(_body())
    messages = list(chat["messages"])
    k = next(i for i, m in enumerate(messages) if m["role"] == "tool")
    messages[k] = {**messages[k], "content": "[result of shell cleared]"}
    _, out = _apply(_body(), messages, chat=chat)
    assert out["input"][4] == {**OUTPUT, "output": "[result of shell cleared]"}
    assert out["input"][:4] == _body()["input"][:4] and out["input"][5:] == _body()["input"][5:]


def test_a_compacted_range_drops_its_items_reasoning_included_and_inserts_the_summary() -> None:
    chat, _ = _apply(_body())
    messages = list(chat["messages"])
    # view: instructions, developer, user, assistant(call), tool, assistant, user
    summary = {"role": "user", "content": "<summary turns=1>listed two files</summary>"}
    compacted = [*messages[:2], summary, *messages[5:]]
    _, out = _apply(_body(), compacted, chat=chat)
    given = _body()["input"]
    assert out["input"] == [given[0], {"type": "message", "role": "user", "content": summary["content"]}, *given[5:]]
    assert REASONING not in out["input"], "a reasoning item goes with the turn it belongs to"


def test_move_volatile_and_the_reminder_edit_the_developer_item_and_append_one_item() -> None:
    body = _body()
    body["input"][0] = {
        "type": "message",
        "role": "developer",
        "content": [{"type": "input_text", "text": "Current time: 2026-12-03T10:00:00Z. NEVER force-push."}],
    }
    chat = chat_body(body, body["input"])
    env = Env(counter=counter_for("o200k_base"), context_window=128_000, model="gpt-4o-mini")
    earlier = SessionState("s", previous_system=("Current time: 2026-12-03T09:59:00Z. NEVER force-push.",))
    ctx = context_from_body(chat, env, earlier)  # the clock changed since the session's previous turn
    moved, _ = move_volatile(ctx, VolatilePolicy())
    done, _ = render_reminder(moved, ReminderPolicy())
    out = apply_edits(
        view_of(body, body["input"], chained=False),
        ctx.messages,
        done.messages,
        ctx.tools,
        done.tools,
        ctx.params,
        done.params,
        "gpt-4o-mini",
    )
    developer = out["input"][0]
    assert developer["content"] == [{"type": "input_text", "text": "[current_line: see reminder]. NEVER force-push."}]
    assert out["input"][1:-1] == body["input"][1:], "every other item verbatim"
    assert out["input"][-1]["role"] == "user" and out["input"][-1]["content"].startswith("<reminder>")
    assert out["tools"] is body["tools"] and out["reasoning"] == body["reasoning"]


def test_rewritten_instructions_go_back_to_the_instructions_field() -> None:
    chat, _ = _apply(_body())
    messages = list(chat["messages"])
    messages[0] = {"role": "system", "content": "Be terse, always."}
    _, out = _apply(_body(), messages, chat=chat)
    assert out["instructions"] == "Be terse, always."
    assert out["input"] == _body()["input"]


def test_selected_tools_are_the_clients_objects_namespaces_trimmed_hosted_kept_and_choice_in_responses_form() -> None:
    chat, _ = _apply(_body())
    by_name = {t["function"]["name"]: t for t in chat["tools"]}
    kept = [by_name["shell"], by_name["spawn"]]
    allowed = {
        "type": "allowed_tools",
        "allowed_tools": {"mode": "auto", "tools": [{"type": "function", "function": {"name": "shell"}}]},
    }
    _, out = _apply(_body(), tools=kept, chat=chat, params={"tool_choice": allowed, "prompt_cache_key": "s-1"})
    assert out["tools"][0] is TOOLS[0]
    assert out["tools"][1] == {**TOOLS[2], "tools": [TOOLS[2]["tools"][0]]}
    assert out["tools"][2] is TOOLS[3], "a hosted tool is the provider's to run"
    assert len(out["tools"]) == 3
    assert out["tool_choice"] == {
        "type": "allowed_tools",
        "mode": "auto",
        "tools": [{"type": "function", "name": "shell"}],
    }
    assert out["prompt_cache_key"] == "s-1"


def test_a_chain_sends_the_whole_conversation_without_minted_ids_or_previous_response_id() -> None:
    earlier = [
        {"type": "message", "role": "user", "content": "hi", "id": "msg_" + "a" * 32 + "_0"},
        {"type": "message", "role": "assistant", "id": "msg_up1", "content": [{"type": "output_text", "text": "yo"}]},
    ]
    body = {"model": "m", "input": "again", "previous_response_id": "resp_1", "store": True}
    items = [*(sendable_item(i) for i in earlier), {"type": "message", "role": "user", "content": "again"}]
    chat = chat_body(body, items)
    out = apply_edits(view_of(body, items, chained=True), chat["messages"], chat["messages"], None, None, {}, {}, "m")
    assert "previous_response_id" not in out
    assert out["input"][0] == {"type": "message", "role": "user", "content": "hi"}
    assert out["input"][1] == earlier[1], "a provider's own item id is kept"
    assert out["store"] is True


def test_a_parameter_a_pass_sets_goes_under_its_responses_name() -> None:
    chat, _ = _apply(_body())
    _, out = _apply(_body(), chat=chat, params={"max_completion_tokens": 512, "stream_options": {"x": 1}})
    assert out["max_output_tokens"] == 512
    assert "max_completion_tokens" not in out and "stream_options" not in out
