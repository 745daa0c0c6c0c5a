"""The result to show: a clock in the system prompt no longer kills the provider's prefix cache.

A 30-turn scripted conversation whose system prompt embeds the current time (changing
every turn) and a request id goes through the gateway over real HTTP with the official
SDK. Turn 1 goes as the client sent it (a value seen once may be static text, cacheable
where it is); from turn 2, when the clock has changed, the provider simulator must receive
a byte-identical prefix on every turn (every recorded body up to the reminder extends the
previous turn's) and report cached tokens from turn 3 on (turn 2 misses from the changed
clock on, as the client's own request does), and none when the same conversation goes
through a gateway with the passes off.
"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import openai
import orjson
import pytest

from gateway.assembly.render_reminder import parse_reminder
from tests.procs import GatewayHandle, SimHandle
from tests.shared_data import data_rows

TURNS = 30


@pytest.fixture(scope="module")
def long_rules() -> str:
    """A real system prompt of about 5,000 tokens: tau2-bench's telecom agent instructions and policy.

    Its one line stating a time is left out: this test writes its own clock, and a second
    (fixed) time would be moved to the reminder beside it.
    """
    system = data_rows("agent_loops/tau2_telecom_default.jsonl")[0]["messages"][0]["content"]
    rules = "\n".join(line for line in system.splitlines() if "current time" not in line.lower())
    assert len(rules) > 20_000 and "2025-02-25" not in rules
    return rules


def _system_prompt(rules: str, now: datetime, request_id: str) -> str:
    return (
        f"Current time: {now.isoformat(timespec='seconds')}\n"
        f"Request ID: {request_id}\n\n"
        "You are the context engineer of the team. Answer in one short paragraph.\n\n" + rules
    )


def _converse(gateway: GatewayHandle, rules: str, start: datetime) -> list[dict[str, Any]]:
    """Run the scripted conversation; return per turn the usage, session id and the time sent."""
    client = openai.OpenAI(base_url=gateway.base_url, api_key="sk-volatile-test")
    history: list[dict[str, Any]] = []
    turns: list[dict[str, Any]] = []
    for turn in range(1, TURNS + 1):
        now = start + timedelta(minutes=turn, seconds=turn * 7)
        system = {"role": "system", "content": _system_prompt(rules, now, str(uuid.uuid4()))}
        history.append({"role": "user", "content": f"Question {turn}: what should the reminder hold now?"})
        raw = client.chat.completions.with_raw_response.create(model="gpt-4o-mini", messages=[system, *history])
        answer = raw.parse()
        history.append({"role": "assistant", "content": answer.choices[0].message.content})
        turns.append(
            {
                "cached": answer.usage.prompt_tokens_details.cached_tokens,
                "prompt": answer.usage.prompt_tokens,
                "session": raw.headers.get("x-ventana-session-id"),
                "now": now.isoformat(timespec="seconds"),
            }
        )
    return turns


def test_prefix_is_byte_identical_from_turn_two_and_cached_from_turn_three(
    default_gateway: GatewayHandle, sim: SimHandle, long_rules: str
) -> None:
    sim.reset()
    turns = _converse(default_gateway, long_rules, datetime(2026, 11, 29, 9, 0, tzinfo=UTC))
    bodies = sim.received()
    assert len(bodies) == TURNS

    first = bodies[0]["messages"]
    assert first[0]["content"].startswith(f"Current time: {turns[0]['now']}"), "turn 1 goes as the client sent it"
    previous: list[Any] | None = None
    for turn, (body, seen) in enumerate(zip(bodies[1:], turns[1:], strict=True), start=2):
        *stable, reminder = body["messages"]
        lines = parse_reminder(reminder["content"])
        assert reminder["role"] == "user" and lines is not None, f"turn {turn}: the last message is not the reminder"
        assert any(seen["now"] in text for _kind, text in lines), f"turn {turn}: this turn's time is not reminded"
        assert seen["now"] not in orjson.dumps(stable).decode(), f"turn {turn}: the time leaked into the prefix"
        if previous is not None:
            assert orjson.dumps(stable[: len(previous)]) == orjson.dumps(previous), f"turn {turn}: prefix changed"
        previous = stable

    assert turns[0]["cached"] == 0
    assert all(t["cached"] > 1024 for t in turns[2:]), [t["cached"] for t in turns]
    assert len({t["session"] for t in turns}) == 1, "a timestamp in the system prompt split the session"


def test_without_the_passes_nothing_is_ever_cached(
    passthrough_gateway: GatewayHandle, sim: SimHandle, long_rules: str
) -> None:
    sim.reset()
    turns = _converse(passthrough_gateway, long_rules, datetime(2026, 11, 30, 14, 0, tzinfo=UTC))
    bodies = sim.received()
    assert all(b["messages"][0]["content"].startswith("Current time: 2026-11-30T") for b in bodies)
    assert all(b["messages"][-1]["content"].startswith("Question ") for b in bodies)
    assert [t["cached"] for t in turns] == [0] * TURNS
    assert all(t["prompt"] > 1024 for t in turns)


def test_a_value_no_pattern_knows_is_learned_from_the_previous_turn(
    default_gateway: GatewayHandle, sim: SimHandle, long_rules: str
) -> None:
    sim.reset()
    client = openai.OpenAI(base_url=default_gateway.base_url, api_key="sk-learn-test")
    cached, sessions = [], set()
    for turn in range(1, 7):
        system = {"role": "system", "content": f"Served by worker wp{turn * 37 % 100:02d}x.\n\n{long_rules}"}
        messages = [system, {"role": "user", "content": "Which block goes first?"}]
        raw = client.chat.completions.with_raw_response.create(model="gpt-4o-mini", messages=messages)
        cached.append(raw.parse().usage.prompt_tokens_details.cached_tokens)
        sessions.add(raw.headers.get("x-ventana-session-id"))
    systems = [body["messages"][0]["content"] for body in sim.received()]
    assert systems[0].startswith("Served by worker wp37x.")
    assert systems[1].startswith("Served by worker [learned: see reminder].")
    assert len(set(systems[1:])) == 1, "the learned span must keep the prefix stable"
    assert len(sessions) == 1
    assert cached[:2] == [0, 0] and all(c > 1024 for c in cached[2:]), cached


def test_stream_with_trailing_tool_results_gets_the_reminder_last(
    default_gateway: GatewayHandle, sim: SimHandle
) -> None:
    client = openai.OpenAI(base_url=default_gateway.base_url, api_key="sk-stream")
    call = {"id": "call_1", "type": "function", "function": {"name": "get_time", "arguments": "{}"}}
    tool = {"type": "function", "function": {"name": "get_time", "description": "Clock, synced 2026-11-29 09:00"}}
    messages = [
        {"role": "system", "content": "Today is 2026-11-29.\n<critical>Always answer in UTC.</critical>"},
        {"role": "user", "content": "What time is it?"},
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "call_1", "content": "09:41"},
    ]
    chunks = list(client.chat.completions.create(model="gpt-4o-mini", messages=messages, tools=[tool], stream=True))
    assert chunks[-1].choices[0].finish_reason == "stop"
    body = sim.received()[-1]
    assert body["messages"][:-1][1:] == messages[1:]
    lines = dict(parse_reminder(body["messages"][-1]["content"]) or [])
    assert lines["critical_rule"] == "Always answer in UTC."
    # a session's first turn: the date may be static text, cacheable where it is; it moves once it changes
    assert body["messages"][0] == messages[0]
    assert body["tools"] == [tool], "a tool definition is the client's static text: never edited"


def test_a_request_with_nothing_to_move_is_forwarded_as_sent(
    default_gateway: GatewayHandle, passthrough_gateway: GatewayHandle, sim: SimHandle
) -> None:
    messages = [{"role": "system", "content": "You are terse."}, {"role": "user", "content": "Say hi"}]
    forwarded = []
    for gateway in (passthrough_gateway, default_gateway):
        client = openai.OpenAI(base_url=gateway.base_url, api_key="sk-plain")
        client.chat.completions.create(model="gpt-4o-mini", messages=messages, temperature=0)
        forwarded.append(sim.received()[-1])
    assert forwarded[1]["messages"] == messages
    assert list(forwarded[1].items()) == list(forwarded[0].items()), "same bytes as with every pass off"
