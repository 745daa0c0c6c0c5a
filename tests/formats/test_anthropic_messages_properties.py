"""Properties of the Messages translation over generated agent loops (hypothesis).

Any valid Messages conversation (text, parallel tool calls, results in any order within their
turn, optional text beside them) becomes a chat body the chat route accepts, with every call
answered right after it; and an answer translated to a Message and sent back as the next
turn's assistant content yields the same calls.
"""

from __future__ import annotations

from typing import Any

import orjson
from hypothesis import given, settings
from hypothesis import strategies as st

from gateway.api.validate import validate_chat_request
from gateway.assembly.verify_assembly import tool_pairing_problems
from gateway.formats.anthropic_messages import chat_body, message_from_chat

_TEXT = st.text(alphabet="abc xyz\n", min_size=1, max_size=12)
_ARGS = st.dictionaries(
    st.sampled_from(["path", "n", "q"]), st.one_of(st.integers(min_value=-(2**53), max_value=2**53), _TEXT), max_size=3
)


@st.composite
def conversations(draw: st.DrawFn) -> dict[str, Any]:
    messages: list[dict[str, Any]] = [{"role": "user", "content": draw(_TEXT)}]
    for r in range(draw(st.integers(min_value=0, max_value=6))):
        calls = [
            {
                "type": "tool_use",
                "id": f"toolu_{r}_{k}",
                "name": draw(st.sampled_from(["read", "grep"])),
                "input": draw(_ARGS),
            }
            for k in range(draw(st.integers(min_value=0, max_value=3)))
        ]
        said = [{"type": "text", "text": draw(_TEXT)}] if draw(st.booleans()) or not calls else []
        messages.append({"role": "assistant", "content": said + calls})
        results: list[dict[str, Any]] = [
            {"type": "tool_result", "tool_use_id": c["id"], "content": draw(_TEXT), "is_error": draw(st.booleans())}
            for c in calls
        ]
        results = draw(st.permutations(results))
        extra = [{"type": "text", "text": draw(_TEXT)}] if draw(st.booleans()) or not results else []
        content = draw(st.permutations(results + extra))  # Anthropic asks results first; clients vary
        messages.append({"role": "user", "content": content})
    tools = [{"name": n, "input_schema": {"type": "object"}} for n in ("read", "grep")]
    return {"model": "m", "max_tokens": 64, "messages": messages, "tools": tools}


@settings(max_examples=150, deadline=None)
@given(conversations(), st.sampled_from(["anthropic", "openai"]))
def test_every_conversation_becomes_a_valid_chat_body_with_every_call_answered(
    request: dict[str, Any], provider: str
) -> None:
    body = chat_body(request, provider)
    validate_chat_request(body, max_messages=1000)
    assert tool_pairing_problems(body["messages"]) == []
    calls = [
        b["id"] for m in request["messages"] for b in m["content"] if isinstance(b, dict) and b["type"] == "tool_use"
    ]
    results = [m["tool_call_id"] for m in body["messages"] if m["role"] == "tool"]
    assert sorted(calls) == sorted(results)


@settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["read", "grep"]), _ARGS), max_size=3), st.one_of(st.none(), _TEXT))
def test_an_answer_sent_back_as_history_keeps_its_calls(
    calls: list[tuple[str, dict[str, Any]]], text: str | None
) -> None:
    tool_calls = [
        {"id": f"call_{i}", "type": "function", "function": {"name": name, "arguments": orjson.dumps(args).decode()}}
        for i, (name, args) in enumerate(calls)
    ]
    answer = {"id": "chatcmpl-1", "choices": [{"message": {"content": text, "tool_calls": tool_calls or None}}]}
    message = message_from_chat(answer, "m")
    history = [{"role": "user", "content": "go"}, {"role": "assistant", "content": message["content"] or "..."}]
    (_, assistant) = chat_body({"model": "m", "max_tokens": 5, "messages": history}, "openai")["messages"]
    sent_back = [
        (c["function"]["name"], orjson.loads(c["function"]["arguments"])) for c in assistant.get("tool_calls", [])
    ]
    assert sent_back == [(name, args) for name, args in calls]
    if text:
        assert assistant["content"] == text
