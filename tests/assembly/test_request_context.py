"""context_from_body: an agent's unchanged tool list is read as last turn's tuple, so what is kept by it is found."""

from __future__ import annotations

from gateway.assembly.context import Context, Env, SessionState
from gateway.assembly.request import context_from_body
from gateway.tokens import counter_for

TOOLS = [{"type": "function", "function": {"name": f"tool_{i}", "description": "d" * 40}} for i in range(20)]


def _ctx(body: dict[str, object]) -> Context:
    counter = counter_for("o200k_base").for_request()
    return context_from_body(body, Env(counter=counter, context_window=128_000, model="m"), SessionState("s"))


def test_the_same_tool_list_is_the_same_tuple_and_its_count_is_found_again() -> None:
    first = _ctx({"model": "m", "messages": [{"role": "user", "content": "hi"}], "tools": TOOLS})
    again = _ctx({"model": "m", "messages": [{"role": "user", "content": "and?"}], "tools": TOOLS})
    assert first.tools is again.tools and first.tools == tuple(TOOLS)
    assert again.env.counter.tools(again.tools) == first.env.counter.tools(first.tools)
    copied = _ctx({"model": "m", "messages": [{"role": "user", "content": "hi"}], "tools": [dict(t) for t in TOOLS]})
    assert copied.tools == first.tools and copied.tools is not first.tools, "an equal list is its own"
    assert _ctx({"model": "m", "messages": [{"role": "user", "content": "hi"}]}).tools is None
