"""Builders for tool-pruning tests: a realistic tool catalogue and contexts around it."""

from __future__ import annotations

from typing import Any

from gateway.assembly.context import Context, Env, SessionState
from gateway.tokens import counter_for

CATALOGUE = {
    "get_weather": "Current weather and temperature forecast for a city",
    "send_email": "Send an email message to a recipient with subject and body",
    "search_flights": "Search airline flights between two airports on a date",
    "book_hotel": "Book a hotel room in a city for check-in and check-out dates",
    "convert_currency": "Convert an amount of money from one currency to another at today's exchange rate",
    "get_stock_price": "Latest stock market price for a ticker symbol",
    "translate_text": "Translate text from one language into another language",
    "create_calendarEvent": "Create a calendar event with a title, start time and attendees",
    "play_music": "Play a song, album or playlist on the speaker",
    "order_food": "Order food delivery from a restaurant menu",
    "get_news": "Latest news headlines about a topic",
    "set_timer": "Set a countdown timer for a number of minutes",
}


def tool(name: str, description: str, **params: str) -> dict[str, Any]:
    props = {k: {"type": "string", "description": v} for k, v in params.items()}
    return {
        "type": "function",
        "function": {"name": name, "description": description, "parameters": {"type": "object", "properties": props}},
    }


def catalogue(n: int | None = None) -> list[dict[str, Any]]:
    items = list(CATALOGUE.items())[:n]
    return [tool(name, desc, query=f"what {name.replace('_', ' ')} needs") for name, desc in items]


def make_ctx(
    messages: list[dict[str, Any]],
    tools: list[dict[str, Any]] | None,
    *,
    state: SessionState | None = None,
    provider: str = "openai",
    **params: Any,
) -> Context:
    env = Env(counter=counter_for("o200k_base"), context_window=128_000, model="gpt-4o-mini", provider=provider)
    return Context(
        messages=tuple(messages),
        tools=tuple(tools) if tools is not None else None,
        params={"model": "gpt-4o-mini", **params},
        env=env,
        session=state or SessionState(session_id="s1"),
    )


def user(text: str) -> dict[str, Any]:
    return {"role": "user", "content": text}


def call(call_id: str, name: str) -> list[dict[str, Any]]:
    """An assistant tool call and its result."""
    return [
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [{"id": call_id, "type": "function", "function": {"name": name, "arguments": "{}"}}],
        },
        {"role": "tool", "tool_call_id": call_id, "content": f"result of {name}"},
    ]


#: The turn-scored, always-pruning pass these older tests were written for: ``mode: prune``,
#: no ``find_tools``, no session scoring, no share cap. New behaviour has its own tests.
LEGACY_TOOLS: dict[str, Any] = {"mode": "prune", "find_tools": False, "session_scoring": False, "budget_share": None}


def legacy_policy(**overrides: Any) -> Any:
    from gateway.assembly.prune_tools import ToolPolicy

    return ToolPolicy(**{**LEGACY_TOOLS, **overrides})
