"""The OpenAI Agents SDK's default (Responses) model runs a function-tool agent through the gateway."""

from __future__ import annotations

import openai
import pytest

from tests.procs import GatewayHandle, SimHandle

agents = pytest.importorskip("agents")


def _run_config(gw: GatewayHandle) -> object:
    from agents import RunConfig
    from agents.models.openai_provider import OpenAIProvider

    client = openai.AsyncOpenAI(base_url=gw.base_url, api_key="sk-agent")
    return RunConfig(model_provider=OpenAIProvider(openai_client=client, use_responses=True), tracing_disabled=True)


async def test_agent_with_a_function_tool_over_several_turns(default_gateway: GatewayHandle, sim: SimHandle) -> None:
    from agents import Agent, ModelSettings, Runner, function_tool

    asked: list[str] = []

    @function_tool
    def get_weather(city: str) -> str:
        """Current weather for a city."""
        asked.append(city)
        return f"22 C and sunny in {city}"

    agent = Agent(
        name="weather",
        instructions="Answer weather questions with the tool.",
        model="gpt-4o-mini",
        tools=[get_weather],
        model_settings=ModelSettings(tool_choice="required"),  # the simulator calls a tool only when forced
    )
    config = _run_config(default_gateway)
    first = await Runner.run(agent, "What is the weather in Lima?", run_config=config)
    assert asked == ["example"]
    assert first.final_output.startswith("Simulated answer")
    after_tool = sim.received()[-1]["messages"]
    assert after_tool[-1]["role"] == "tool" and after_tool[-1]["content"] == "22 C and sunny in example"
    assert after_tool[-2]["tool_calls"][0]["function"]["name"] == "get_weather"

    # Turn 2: the client resends the whole history as input items (the SDK's default).
    history = [*first.to_input_list(), {"role": "user", "content": "And tomorrow?"}]
    second = await Runner.run(agent, history, run_config=config)
    assert asked == ["example", "example"]
    resent = sim.received()[-1]["messages"]
    assert resent[: len(after_tool)] == after_tool, "turn 1 reaches the provider again, unchanged"

    # Turn 3: the server keeps the conversation (previous_response_id), the client sends only what is new.
    third = await Runner.run(
        agent, "Thanks, one more time?", previous_response_id=second.last_response_id, run_config=config
    )
    assert third.final_output.startswith("Simulated answer")
    chained = sim.received()[-1]["messages"]
    assert any(m.get("content") == "And tomorrow?" for m in chained), "the stored conversation was rebuilt"
    assert chained[-1]["role"] == "tool" and len(asked) == 3

    # Turn 4, streamed: the SDK consumes the Responses events as they come.
    streamed = Runner.run_streamed(agent, "Stream it", previous_response_id=third.last_response_id, run_config=config)
    kinds = [event.type async for event in streamed.stream_events()]
    assert "raw_response_event" in kinds and len(asked) == 4
    assert str(streamed.final_output).startswith("Simulated answer")
