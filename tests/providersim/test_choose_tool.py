"""Which tools the simulated model calls: input/expected pairs for ``choose_tools``."""

from __future__ import annotations

from typing import Any

import pytest

from gateway.providersim.choose_tool import choose_tools


def _fn(name: str, description: str, **props: Any) -> dict[str, Any]:
    params = {"type": "object", "properties": props, "required": list(props)}
    return {"type": "function", "function": {"name": name, "description": description, "parameters": params}}


TOOLS = [
    _fn("search_flights", "Search flights between two airports", origin={"type": "string"}),
    _fn("lookup_booking", "Read a booking by reference", reference={"type": "string"}),
    _fn("send_email", "Send an email message", to={"type": "string"}),
]


def _names(messages: list[dict[str, Any]], **extra: Any) -> list[str]:
    return [p.name for p in choose_tools({"messages": messages, "tools": TOOLS, **extra})]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Find me flights from origin: LIS to Oslo", ["search_flights"]),
        ("Check the booking reference: QX-1, then email it to me", ["lookup_booking", "send_email"]),  # order asked
        ("Turn 3: please check the next item on the list and tell me what changed.", []),
        ("thanks!", []),
    ],
)
def test_auto_calls_the_tools_the_newest_need_names(text: str, expected: list[str]) -> None:
    assert _names([{"role": "user", "content": text}]) == expected


def test_arguments_come_from_the_conversation() -> None:
    picks = choose_tools({"messages": [{"role": "user", "content": "flights from origin: LIS"}], "tools": TOOLS})
    assert picks[0].arguments == {"origin": "LIS"}


def test_reminder_after_the_need_is_not_the_need() -> None:
    messages = [
        {"role": "user", "content": "Search flights to Oslo"},
        {"role": "user", "content": "<reminder>Send an email booking reference</reminder>"},
    ]
    assert _names(messages) == ["search_flights"]


def test_allowed_tools_restricts_the_choice_and_keeps_its_mode() -> None:
    allowed: dict[str, Any] = {
        "type": "allowed_tools",
        "allowed_tools": {"mode": "required", "tools": [{"type": "function", "function": {"name": "send_email"}}]},
    }
    assert _names([{"role": "user", "content": "Search flights to Oslo"}], tool_choice=allowed) == ["send_email"]
    auto = {**allowed, "allowed_tools": {**allowed["allowed_tools"], "mode": "auto"}}
    assert _names([{"role": "user", "content": "Search flights to Oslo"}], tool_choice=auto) == []


def test_a_called_tool_is_not_called_again_for_the_same_need() -> None:
    call = {"id": "c1", "type": "function", "function": {"name": "search_flights", "arguments": "{}"}}
    messages: list[dict[str, Any]] = [
        {"role": "user", "content": "Search flights to Oslo"},
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "c1", "content": "[]"},
    ]
    assert _names(messages) == []
    assert _names(messages, tool_choice="required") == ["search_flights"]


SEARCH = _fn("find_tools", "Search the tools this gateway can add", query={"type": "string"})


def test_a_need_no_offered_tool_fits_asks_the_gateway_search_once() -> None:
    need = "Convert 20 celsius to fahrenheit"
    body = {"messages": [{"role": "user", "content": need}], "tools": [*TOOLS, SEARCH]}
    (pick,) = choose_tools(body)
    assert (pick.name, pick.arguments) == ("find_tools", {"query": need})
    call = {"id": "s1", "type": "function", "function": {"name": "find_tools", "arguments": "{}"}}
    searched = [
        *body["messages"],
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "s1", "content": "no tool found"},
    ]
    assert choose_tools({**body, "messages": searched}) == [], "after one search it answers in text"
    assert _names([{"role": "user", "content": "Search flights to Oslo"}], tools=[*TOOLS, SEARCH]) == [
        "search_flights"
    ], "a fitting tool is called directly"
    assert choose_tools({**body, "messages": [{"role": "user", "content": "thanks!"}]}) == []


RECALL = _fn("recall_archive", "Earlier turns were summarised; ask for a detail", query={"type": "string"})
SUMMARY = {"role": "user", "content": "<summary>- user: the key to the bike shed is with Tobias.</summary>"}


def test_a_question_about_what_the_request_no_longer_holds_asks_the_gateway_archive_once() -> None:
    question = "Who holds the key to the boiler room?"
    messages = [SUMMARY, {"role": "assistant", "content": "Noted."}, {"role": "user", "content": question}]
    body = {"messages": messages, "tools": [*TOOLS, RECALL]}
    (pick,) = choose_tools(body)
    assert (pick.name, pick.arguments) == ("recall_archive", {"query": question})
    call = {"id": "r1", "type": "function", "function": {"name": "recall_archive", "arguments": "{}"}}
    recalled = [
        *messages,
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "r1", "content": "<recalled>the boiler room key: Marisol</recalled>"},
    ]
    assert choose_tools({**body, "messages": recalled}) == [], "after one recall it answers in text"
    seen = [*messages[:-1], {"role": "user", "content": "Who holds the key to the bike shed?"}]
    assert choose_tools({**body, "messages": seen}) == [], "what the summary holds is answered, not recalled"
    assert choose_tools({**body, "messages": [*messages[:-1], {"role": "user", "content": "Boiler room."}]}) == [], (
        "only a question asks the archive"
    )
    assert choose_tools({**body, "tools": TOOLS}) == [], "no archive tool offered: nothing to ask"


def test_a_resent_history_is_read_for_facts_once_and_newer_facts_still_win(monkeypatch: pytest.MonkeyPatch) -> None:
    """The simulator shares the benchmark machine's cores with the gateway it measures: a resent
    history's tool results are parsed for facts once, not on every request, with the same answer."""
    from gateway.providersim import schema_values

    parsed: list[str] = []
    real = schema_values._json_in

    def counting(text: str) -> Any:
        parsed.append(text)
        return real(text)

    monkeypatch.setattr(schema_values, "_json_in", counting)
    history = [
        {"role": "user", "content": "book it: origin: LIM"},
        {"role": "tool", "tool_call_id": "c1", "content": '{"origin": "CUZ", "reference": "R-7"}'},
    ]
    first = schema_values.conversation_facts(history)
    assert first["origin"] == "CUZ" and first["reference"] == "R-7"  # the newest mention wins
    calls = len(parsed)
    again = [dict(m) for m in history]  # the next request parses its body into new objects
    again.append({"role": "user", "content": "origin = AQP"})
    facts = schema_values.conversation_facts(again)
    assert facts["origin"] == "AQP" and facts["reference"] == "R-7"
    assert len(parsed) - calls == 1  # only the new message
