"""A two-tool agent loop through Ventana, with nothing but the openai SDK.

Start the gateway first (with no OPENAI_API_KEY it serves the local provider simulator,
which calls tools like a model does), then run this script:

    ventana serve &
    python examples/tool_agent.py

The model asks for the weather, then for a unit conversion using the temperature the
first tool returned, then answers in text; the loop ends by itself. ``VENTANA_URL``
points the script at another gateway.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable
from typing import Any

from openai import OpenAI


def get_weather(city: str, unit: str = "metric") -> str:
    return json.dumps({"city": city, "celsius": 18, "sky": "cloudy"})


def convert_temperature(celsius: float) -> str:
    return f"{celsius * 9 / 5 + 32:.1f} F"


FUNCTIONS: dict[str, Callable[..., str]] = {"get_weather": get_weather, "convert_temperature": convert_temperature}
TOOLS: list[dict[str, Any]] = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": "Get the current weather for a city, with the temperature in celsius.",
            "parameters": {
                "type": "object",
                "properties": {"city": {"type": "string"}, "unit": {"type": "string", "enum": ["metric", "imperial"]}},
                "required": ["city"],
            },
        },
    },
    {
        "type": "function",
        "function": {
            "name": "convert_temperature",
            "description": "Convert a temperature from celsius to fahrenheit.",
            "parameters": {"type": "object", "properties": {"celsius": {"type": "number"}}, "required": ["celsius"]},
        },
    },
]


def run(base_url: str, task: str, max_steps: int = 8) -> list[dict[str, Any]]:
    """Run the agent until the model answers in text; return the conversation."""
    client = OpenAI(base_url=base_url, api_key=os.environ.get("OPENAI_API_KEY", "no-key-needed"))
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "You are a weather assistant. Use the tools."},
        {"role": "user", "content": task},
    ]
    for _ in range(max_steps):
        reply = client.chat.completions.create(
            model="gpt-4o-mini",
            messages=messages,
            tools=TOOLS,
            parallel_tool_calls=False,
            extra_headers={"X-Session-Id": "example-tool-agent"},
        )
        message = reply.choices[0].message
        messages.append(message.model_dump(exclude_none=True))
        if not message.tool_calls:
            print(f"assistant: {message.content}")
            return messages
        for call in message.tool_calls:
            args = json.loads(call.function.arguments)
            result = FUNCTIONS[call.function.name](**args)
            print(f"tool call: {call.function.name}({args}) -> {result}")
            messages.append({"role": "tool", "tool_call_id": call.id, "content": result})
    raise SystemExit(f"no final answer after {max_steps} steps")


if __name__ == "__main__":
    url = os.environ.get("VENTANA_URL", "http://127.0.0.1:8000/v1")
    task = " ".join(sys.argv[1:]) or "Look up the weather for city: Paris, then convert the temperature to fahrenheit."
    run(url, task)
