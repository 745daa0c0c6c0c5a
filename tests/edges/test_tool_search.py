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
