"""The pieces of the find_tools loop that need no network: usage sums, call parsing, what is served."""

from __future__ import annotations

from gateway.assembly.tool_modes import FIND_TOOLS
from gateway.edges.served_tools import add_usage
from gateway.edges.tool_search import search_query, served_search
from tests.assembly.tool_fixtures import catalogue, tool


def test_usage_of_every_call_is_summed_field_by_field() -> None:
    first = {
        "prompt_tokens": 100,
        "completion_tokens": 7,
        "total_tokens": 107,
        "prompt_tokens_details": {"cached_tokens": 64},
    }
    second = {
        "prompt_tokens": 120,
        "completion_tokens": 9,
        "total_tokens": 129,
        "prompt_tokens_details": {"cached_tokens": 0},
    }
    assert add_usage(first, second) == {
        "prompt_tokens": 220,
        "completion_tokens": 16,
        "total_tokens": 236,
        "prompt_tokens_details": {"cached_tokens": 64},
    }
    assert add_usage(None, second) == second and add_usage(first, None) == first


def test_the_query_of_a_find_tools_call_is_read_and_other_calls_are_not_searches() -> None:
    call = {"function": {"name": "find_tools", "arguments": '{"query": "set a timer"}'}}
    other = {"function": {"name": "get_weather", "arguments": "{}"}}
    assert search_query({"tool_calls": [call]}) == "set a timer"
    assert search_query({"tool_calls": [other]}) is None
    assert search_query({"content": "hi"}) is None
    assert search_query({"tool_calls": [{"function": {"name": "find_tools", "arguments": "not json"}}]}) == ""


def test_only_the_gateways_own_find_tools_is_served() -> None:
    tools = catalogue()
    assert served_search({"tools": [*tools[:3], FIND_TOOLS]}, tools)
    assert not served_search({"tools": tools[:3]}, tools)
    own = [*tools, tool("find_tools", "the client's own search")]
    assert not served_search({"tools": [*tools[:3], FIND_TOOLS]}, own)


async def test_a_search_brings_what_the_session_needs_by_now_in_the_same_change() -> None:
    """The set changes on a search anyway (the cache is lost from the tools on): the tools the
    conversation has come to need since the first set join in that change, not in a later search.
    Before (issue 34), only the ``find_top`` matches of the query were added, and mix_tau2 sessions
    searched again a few turns later (1.17 set changes per session)."""
    from gateway.assembly.context import SessionState
    from gateway.assembly.prune_tools import ToolPolicy
    from gateway.edges.tool_search import ToolSearch
    from gateway.sessions.memory import MemorySessionStore
    from gateway.tokens import counter_for

    tools = catalogue()
    store = MemorySessionStore()
    await store.save(SessionState(session_id="s", tool_set=("get_weather", "get_news")), base=None)
    policy = ToolPolicy(find_top=1, mode="prune", min_tool_tokens=0)
    search = ToolSearch(
        client_tools=tools, session_id="s", sessions=store, policy=policy, counter=counter_for("o200k_base")
    )
    messages = [
        {"role": "user", "content": "What is the weather in Lisbon?"},
        {"role": "assistant", "content": "Sunny, 24C."},
        {"role": "user", "content": "Convert 200 euros to dollars at the exchange rate, then book a hotel room there."},
    ]
    offered = [tools[0], tools[10], FIND_TOOLS]
    body, decisions = await search.expand({"messages": messages, "tools": offered}, "Book a hotel room in a city")
    names = [t["function"]["name"] for t in body["tools"]]
    assert names[:3] == ["get_weather", "get_news", "book_hotel"], "grown by appending: the old set stays a prefix"
    assert "convert_currency" in names, "asked for in the same conversation: brought by the same change"
    assert (await store.load("s")).tool_set[: len(names) - 1] == tuple(n for n in names if n != "find_tools")
    assert decisions[0].detail["added"][0] == "book_hotel"


async def test_a_search_that_finds_one_tool_of_an_app_brings_the_apps_other_tools() -> None:
    """BFCL's multi-turn classes open every description with one preamble ("This tool belongs to the
    Vehicle Control System, ..."); each new user turn asks for another of the class's tools. Before,
    each was one more search and one more set change (2.83 per session on bfcl_multi_turn)."""
    from gateway.assembly.context import SessionState
    from gateway.assembly.prune_tools import ToolPolicy
    from gateway.assembly.tool_scoring.session_scores import app_groups
    from gateway.edges.tool_search import ToolSearch
    from gateway.sessions.memory import MemorySessionStore
    from gateway.tokens import counter_for

    car = "This tool belongs to the vehicle control system, which allows users to control the car. Tool description:"
    vehicle = [
        tool(n, f"{car} {d}")
        for n, d in [
            ("startEngine", "Start the engine."),
            ("pressBrakePedal", "Press the brake."),
            ("lockDoors", "Lock the doors."),
        ]
    ]
    tools = [*catalogue(), *vehicle]
    assert app_groups(tools)[-1] == frozenset({len(tools) - 3, len(tools) - 2})
    store = MemorySessionStore()
    await store.save(SessionState(session_id="s", tool_set=("get_weather",)), base=None)
    policy = ToolPolicy(find_top=1, mode="prune", min_tool_tokens=0)
    counter = counter_for("o200k_base")
    search = ToolSearch(client_tools=tools, session_id="s", sessions=store, policy=policy, counter=counter)
    messages = [
        {"role": "user", "content": "What is the weather in Lisbon?"},
        {"role": "user", "content": "Start the car."},
    ]
    body, _ = await search.expand({"messages": messages, "tools": [tools[0], FIND_TOOLS]}, "Start the engine")
    names = [t["function"]["name"] for t in body["tools"]]
    assert {"startEngine", "pressBrakePedal", "lockDoors"} <= set(names), "the app's tools join in one change"
