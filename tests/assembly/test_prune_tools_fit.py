"""Tools that crowd a small window are pruned once, where a compaction would come, keeping what the loop calls.

tau2-bench's telecom agent sends a 5.3K system prompt and 13 tools (1.3K) on every request: at 8K the head
is 6.7K and each compaction bought ~390 tokens of growth (19 rewrites for 9K of growth, session 38). The
loop here is the repo's tau2 subset (its real system prompt and tools) continued with the lookups the
recorded runs make (``get_details_by_id`` on line after line, 98 times in the longest run).
"""

from __future__ import annotations

import itertools
import json
from typing import Any

from benchmarks.agent_loops import TARGET, THRESHOLD
from benchmarks.agent_loops_inproc import room_behind_head
from gateway.assembly.compaction_policy import CompactionPolicy
from gateway.assembly.context import Message
from gateway.assembly.policy import Policy
from gateway.assembly.tool_modes import FIND_TOOLS_NAME
from tests.assembly.compaction_helpers import COUNTER, rewrites, run_turns
from tests.shared_data import data_rows


def _names(tools: Any) -> tuple[str, ...]:
    return tuple(t["function"]["name"] for t in tools or ())


def _loop(lookups: int) -> tuple[list[list[Message]], list[dict[str, Any]]]:
    """Histories (one request before each assistant message) of the longest tau2 run, then ``lookups``
    more rounds of ``get_details_by_id`` on lines and devices, each answered, with a short reply between."""
    run = max(data_rows("agent_loops/tau2_telecom_default.jsonl"), key=lambda r: len(r["messages"]))
    messages: list[Message] = list(run["messages"])
    for k in range(lookups):
        call_id = f"call_more_{k}"
        target = f"L{1001 + k % 3}" if k % 2 == 0 else f"D{1001 + k % 3}"
        call = {
            "id": call_id,
            "type": "function",
            "function": {"name": "get_details_by_id", "arguments": json.dumps({"id": target})},
        }
        result = {
            "line_id": target,
            "status": "Active",
            "plan_id": "P1002",
            "data_used_gb": 3.2 + k % 5,
            "roaming_enabled": k % 3 == 0,
            "device_id": f"D{1001 + k % 3}",
            "suspension_start_date": None,
        }
        messages += [
            {"role": "assistant", "content": None, "tool_calls": [call]},
            {"role": "tool", "tool_call_id": call_id, "content": json.dumps(result)},
            {
                "role": "assistant",
                "content": f"I checked {target}; could you toggle airplane mode and tell me what you see?",
            },
            {"role": "user", "content": f"Done ({k}). It still shows no data, the status bar says LTE."},
        ]
    histories = [messages[:i] for i, m in enumerate(messages) if m.get("role") == "assistant" and i > 0]
    return histories, list(run["tools"])


def _policy() -> Policy:
    return Policy(compaction=CompactionPolicy(threshold=THRESHOLD, target=TARGET, keep_recent_rounds=4))


def test_behind_a_head_that_fills_the_window_the_tools_are_pruned_once_and_compactions_come_apart() -> None:
    """At 8K: at most one rewrite per growth of the room a compaction has behind the client's full head
    (what main reaches: ~390 tokens a compaction), the tool set changes once, every tool the loop calls is
    offered on the request it calls it, and the request never passes the window."""
    histories, tools = _loop(60)
    window = 8_000
    results = run_turns(histories, _policy(), window=window, tools=tools, prepare_ahead=True)
    growth = COUNTER.messages(histories[-1]) - COUNTER.messages(histories[0])
    room = room_behind_head(histories[-1], _policy().compaction, window, tools)
    changed = rewrites(results)
    assert len(changed) <= 0.7 * growth / room, (
        f"{len(changed)} rewrites for {growth / room:.1f} growth steps of {room:.0f}"
    )
    sets = [_names(r.assembled.tools) for r in results]
    changes = sum(a != b for a, b in itertools.pairwise(sets))
    assert changes == 1, f"{changes} tool-set changes"
    assert len(sets[-1]) < len(tools), "the tools are pruned"
    assert FIND_TOOLS_NAME in sets[-1], "what the set misses is one search away"
    for history, offered in zip(histories[1:], sets, strict=False):
        for call in history[-1].get("tool_calls") or []:
            assert call["function"]["name"] in offered, f"{call['function']['name']} called but not offered"
    assert all(COUNTER.request(r.assembled.messages, r.assembled.tools) <= window for r in results)


def test_behind_a_head_under_half_the_window_every_tool_goes_out() -> None:
    """At 16K the same head is 42 % of the window: the tools are under ``min_tool_tokens`` and go whole."""
    histories, tools = _loop(20)
    results = run_turns(histories, _policy(), window=16_000, tools=tools, prepare_ahead=True)
    assert all(_names(r.assembled.tools) == _names(tools) for r in results)
