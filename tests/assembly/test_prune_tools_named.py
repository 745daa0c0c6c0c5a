"""prune_tools: a tool the system prompt names as a tool is in the session's first set (issue 34).

ToolBench's prompt says 'ALWAYS call "Finish" function at the end of the task'. Scored on the task
alone, ``Finish`` lost to the task's own API tools under the budget, and half the replayed ToolBench
sessions searched for it at their last step: one more tool-set change each.
"""

from __future__ import annotations

from gateway.assembly.policy import Policy
from gateway.assembly.prune_tools import ToolPolicy, prune_tools
from gateway.assembly.tool_required import system_named
from gateway.assembly.tool_scoring import tool_name
from tests.assembly.tool_fixtures import catalogue, make_ctx, tool, user

assert Policy  # imported first: policy.py gathers the pass policies
POLICY = ToolPolicy(min_tool_tokens=0, mode="prune", budget_share=None, max_tools=3, min_tools=1)
SYSTEM = (
    "You are AutoGPT, you can use many tools(functions) to do the following task.\n"
    'Remember: 1.ALWAYS call "Finish" function at the end of the task. '
    "If you cannot finish the task, say so."
)
FINISH = tool("Finish", "If you believe that you have obtained a result that can answer the task, call this.")
TOOLS = [*catalogue(), FINISH]
TASK = "Weather and news headlines for Paris, convert 300 dollars to euros, and book a hotel room there."


def _names(ctx) -> list[str]:
    return [tool_name(t) for t in ctx.tools]


def test_the_tool_the_system_prompt_tells_the_model_to_call_is_in_the_first_set() -> None:
    messages = [{"role": "system", "content": SYSTEM}, user(TASK)]
    out, _ = prune_tools(make_ctx(messages, TOOLS), POLICY)
    assert "get_news" in _names(out) and "find_tools" in _names(out)
    assert "Finish" in _names(out), "named by the client's manual: kept, not searched for at the last step"


def test_a_plain_word_counts_only_quoted_or_called_and_an_identifier_as_a_whole_word() -> None:
    names = ["Finish", "search", "get_weather", "get_weather_v2", "send_email"]
    system = [{"role": "system", "content": 'Finish the task. Call "Finish" at the end; use get_weather or search(q).'}]
    assert system_named(system, names) == {"Finish", "get_weather", "search"}
    plain = [{"role": "system", "content": "Finish the task, then search the web; get_weather_v2 is gone."}]
    assert system_named(plain, names) == {"get_weather_v2"}
    assert system_named([user('call "Finish"')], names) == set(), "only the system prompt is the client's manual"
