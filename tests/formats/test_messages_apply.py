"""The passes' result applied back onto the client's Messages body: each edit in its own place, the rest as sent."""

from __future__ import annotations

import copy
from typing import Any

from gateway.formats.anthropic_messages import ORIGIN, chat_body
from gateway.formats.messages_apply import messages_body

EPHEMERAL = {"type": "ephemeral"}
READ = {"name": "Read", "description": "Read a file", "input_schema": {"type": "object", "$schema": "x"}}
WRITE = {"name": "Write", "description": "Write a file", "input_schema": {"type": "object"}}
SEARCH = {"type": "web_search_20250305", "name": "web_search"}
BODY: dict[str, Any] = {
    "model": "claude-x",
    "max_tokens": 100,
    "system": [{"type": "text", "text": "Static rules. Time: 10:42."}, {"type": "text", "text": "More rules."}],
    "messages": [
        {"role": "user", "content": "Task: fix the bug"},
        {"role": "system", "content": "Agent list"},
        {
            "role": "assistant",
            "content": [
                {"type": "server_tool_use", "id": "srv_1", "name": "web_search", "input": {"q": "bug"}},
                {"type": "web_search_tool_result", "tool_use_id": "srv_1", "content": []},
                {"type": "text", "text": "Reading.", "citations": [{"type": "char_location"}]},
                {"type": "tool_use", "id": "toolu_1", "name": "Read", "input": {"file_path": "/a"}},
            ],
        },
        {
            "role": "user",
            "content": [
                {
                    "type": "tool_result",
                    "tool_use_id": "toolu_1",
                    "is_error": True,
                    "content": [{"type": "text", "text": "x" * 50}, {"type": "tool_reference", "tool_name": "Write"}],
                },
                {"type": "future_block", "data": 1},
                {"type": "text", "text": "continue"},
            ],
        },
        {"role": "assistant", "content": "Done."},
        {"role": "user", "content": "thanks"},
    ],
    "tools": [READ, SEARCH, WRITE],
    "thinking": {"type": "adaptive"},
    "context_management": {"edits": []},
    "unknown": [1, 2],
}


def _view() -> dict[str, Any]:
    view = chat_body(copy.deepcopy(BODY), "anthropic", native=True)
    view["tools"] = [t for t in view["tools"] if t.get("type") == "function"]
    return view


def _apply(view: dict[str, Any], messages: list[Any], tools: list[Any] | None = None) -> Any:
    return messages_body(BODY, view, messages, view["tools"] if tools is None else tools, "claude-x")


def test_an_unchanged_view_gives_the_clients_own_body() -> None:
    view = _view()
    assert _apply(view, copy.deepcopy(view["messages"])) is BODY


def test_a_stubbed_tool_result_edits_only_its_own_block() -> None:
    view = _view()
    messages = copy.deepcopy(view["messages"])
    tool = next(m for m in messages if m["role"] == "tool")
    tool["content"] = "[result of Read cleared]"
    out = _apply(view, messages)
    user = out["messages"][3]
    assert user["content"][0] == {**BODY["messages"][3]["content"][0], "content": "[result of Read cleared]"}
    assert user["content"][1:] == BODY["messages"][3]["content"][1:]
    assert all(out["messages"][i] is BODY["messages"][i] for i in (0, 1, 2, 4, 5))
    assert {k: out[k] for k in ("thinking", "context_management", "unknown")} == {
        k: BODY[k] for k in ("thinking", "context_management", "unknown")
    }


def test_a_breakpoint_lands_on_the_block_it_marks() -> None:
    view = _view()
    messages = copy.deepcopy(view["messages"])
    done = next(i for i, m in enumerate(messages) if m.get(ORIGIN) == [4, -1])
    messages[done] = {**messages[done], "content": [{"type": "text", "text": "Done.", "cache_control": EPHEMERAL}]}
    assistant = next(i for i, m in enumerate(messages) if m.get(ORIGIN) == [2, -1])
    parts = messages[assistant]["content"]
    parts[-1] = {**parts[-1], "cache_control": EPHEMERAL}  # the text part "Reading."
    out = _apply(view, messages)
    assert out["messages"][4]["content"] == [{"type": "text", "text": "Done.", "cache_control": EPHEMERAL}]
    reading = out["messages"][2]["content"][2]
    assert reading == {**BODY["messages"][2]["content"][2], "cache_control": EPHEMERAL}  # citations kept
    assert out["messages"][2]["content"][:2] == BODY["messages"][2]["content"][:2]


def test_compaction_replaces_the_range_and_keeps_the_edges() -> None:
    view = _view()
    messages = copy.deepcopy(view["messages"])
    origins = [m.get(ORIGIN) for m in messages]
    start, end = origins.index([2, -1]), origins.index([4, -1]) + 1
    summary = {"role": "user", "content": "<summary>earlier rounds</summary>"}
    reminder = {"role": "user", "content": "<reminder>time: 10:42</reminder>"}
    out = _apply(view, [*messages[:start], summary, *messages[end:], reminder])
    assert out["messages"] == [BODY["messages"][0], BODY["messages"][1], summary, BODY["messages"][5], reminder]
    assert out["system"] is BODY["system"]


def test_a_moved_volatile_span_edits_only_its_system_block() -> None:
    view = _view()
    messages = copy.deepcopy(view["messages"])
    system = messages[0]
    system["content"] = [{**system["content"][0], "text": "Static rules."}, system["content"][1]]
    out = _apply(view, messages)
    assert out["system"] == [{"type": "text", "text": "Static rules."}, BODY["system"][1]]
    assert out["messages"] == BODY["messages"]


def test_rules_the_gateway_puts_first_join_the_top_level_system() -> None:
    view = _view()
    rules = {"role": "system", "content": "<rules>never push to main</rules>"}
    out = _apply(view, [rules, *copy.deepcopy(view["messages"])])
    assert out["system"] == [{"type": "text", "text": "<rules>never push to main</rules>"}, *BODY["system"]]


def test_selected_tools_are_the_clients_dicts_and_server_tools_stay() -> None:
    view = _view()
    read, write = view["tools"]
    deferred = {**write, "defer_loading": True}
    search_tool = {"type": "tool_search_tool_bm25_20251119", "name": "tool_search_tool_bm25"}
    out = _apply(view, copy.deepcopy(view["messages"]), [read, deferred, search_tool])
    assert out["tools"][0] is READ
    assert out["tools"][1] == {**WRITE, "defer_loading": True}
    assert out["tools"][2:] == [search_tool, SEARCH]


def test_a_tool_definition_is_never_rewritten() -> None:
    view = _view()
    read = copy.deepcopy(view["tools"][0])
    read["function"]["description"] = "Read a file at [clock_time: see reminder]"
    out = _apply(view, copy.deepcopy(view["messages"]), [read, view["tools"][1]])
    assert out["tools"][0] == READ
