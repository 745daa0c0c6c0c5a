"""Real agent frameworks run a two-tool task through the gateway against the simulator, and stop.

The OpenAI Agents SDK (Chat Completions model) and a langchain tool-calling loop each get
the same task; the simulator calls the weather tool, copies the temperature it returned
into the conversion tool, then answers in text, so both loops end by themselves.
"""

from __future__ import annotations

import json
from typing import Any

import openai
import pytest

from tests.procs import GatewayHandle, SimHandle

MODEL = "gpt-4o-mini"
TASK = "Look up the weather for city: Paris, then convert the temperature from celsius to fahrenheit."
CALLS: list[tuple[str, dict[str, Any]]] = []


def get_weather(city: str) -> str:
    """Get the current weather for a city, with the temperature in celsius."""
    CALLS.append(("get_weather", {"city": city}))
    return json.dumps({"city": city, "celsius": 18, "sky": "cloudy"})


def convert_temperature(celsius: float) -> str:
    """Convert a temperature from celsius to fahrenheit."""
    CALLS.append(("convert_temperature", {"celsius": celsius}))
    return f"{celsius * 9 / 5 + 32:.1f} F"


EXPECTED = [("get_weather", {"city": "Paris"}), ("convert_temperature", {"celsius": 18})]


@pytest.fixture(autouse=True)
def _fresh_calls() -> None:
    CALLS.clear()


def _sim_requests(sim: SimHandle, count: int) -> list[dict[str, Any]]:
    return [b for b in sim.received()[-count:] if b.get("tools")]


def test_openai_agents_sdk_completes_a_two_tool_task_and_stops(default_gateway: GatewayHandle, sim: SimHandle) -> None:
    import agents

    agents.set_tracing_disabled(True)
    client = openai.AsyncOpenAI(base_url=default_gateway.base_url, api_key="sk-client", max_retries=0)
    agent = agents.Agent(
        name="weather",
        instructions="You answer weather questions with the tools.",
        model=agents.OpenAIChatCompletionsModel(model=MODEL, openai_client=client),
        model_settings=agents.ModelSettings(parallel_tool_calls=False),
        tools=[agents.function_tool(get_weather), agents.function_tool(convert_temperature)],
    )
    sim.reset()
    result = agents.Runner.run_sync(agent, TASK, max_turns=6)
    assert CALLS == EXPECTED
    assert str(result.final_output).startswith("Simulated answer")
    bodies = _sim_requests(sim, 3)
    assert len(bodies) == 3, "two tool rounds and one final answer"
    assert bodies[-1]["messages"][-1]["content"] == "64.4 F", "the final answer followed the second result"
    assert all(b.get("tool_choice") in (None, "auto") for b in bodies)


def test_langchain_tool_calling_agent_completes_a_two_tool_task_and_stops(
    default_gateway: GatewayHandle, sim: SimHandle
) -> None:
    from langchain_core.messages import BaseMessage, HumanMessage, ToolMessage
    from langchain_core.tools import tool
    from langchain_openai import ChatOpenAI

    tools = {t.name: t for t in (tool(get_weather), tool(convert_temperature))}
    llm = ChatOpenAI(model=MODEL, base_url=default_gateway.base_url, api_key="sk-client", max_retries=0)
    agent = llm.bind_tools(list(tools.values()), parallel_tool_calls=False)
    messages: list[BaseMessage] = [HumanMessage(TASK)]
    sim.reset()
    for _ in range(6):
        reply = agent.invoke(messages)
        messages.append(reply)
        if not reply.tool_calls:
            break
        for call in reply.tool_calls:
            messages.append(ToolMessage(tools[call["name"]].invoke(call["args"]), tool_call_id=call["id"]))
    assert CALLS == EXPECTED
    assert not reply.tool_calls and str(reply.content).startswith("Simulated answer")
    bodies = _sim_requests(sim, 3)
    assert len(bodies) == 3
    assert bodies[-1]["messages"][-1]["content"] == "64.4 F", "the final answer followed the second result"
