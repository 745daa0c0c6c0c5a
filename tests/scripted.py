"""Scripted multi-turn agent conversations built on the real ToolBench runs (tests/data/toolbench.jsonl)."""

from __future__ import annotations

from typing import Any

from gateway.replay.transcripts import turn_ends
from tests.shared_data import data_rows


def toolbench_runs() -> list[dict[str, Any]]:
    return data_rows("toolbench.jsonl")


def agent_session(turns: int) -> tuple[list[dict[str, Any]], list[dict]]:
    """A conversation of ``turns`` client requests: real ToolBench tool calls and results, chained.

    Returns the message list of the last request (the assistant turns are the real model's)
    and the tools offered.
    """
    runs = toolbench_runs()
    tools: list[dict[str, Any]] = []
    seen: set[str] = set()
    for run in runs:
        for tool in run["tools"]:
            if tool["function"]["name"] not in seen:
                seen.add(tool["function"]["name"])
                tools.append(tool)
    system = runs[0]["messages"][0]["content"]
    messages: list[dict[str, Any]] = [{"role": "system", "content": system}]
    steps = [m for run in runs for m in run["messages"][1:] if m["role"] in ("user", "assistant", "tool")]
    i = 0
    while len(turn_ends(messages)) < turns + 1:
        m = steps[i % len(steps)]
        i += 1
        if m["role"] == "tool" and not (messages[-1].get("tool_calls") or messages[-1]["role"] == "tool"):
            continue
        if m["role"] == "assistant" and messages[-1]["role"] == "assistant":
            continue
        if m["role"] == "user" and messages[-1].get("tool_calls"):
            continue
        copy = dict(m)
        if copy.get("tool_calls"):
            copy["tool_calls"] = [{**c, "id": f"call_{i}_{k}"} for k, c in enumerate(copy["tool_calls"])]
        if copy["role"] == "tool":
            last_calls = messages[-1].get("tool_calls") or []
            answered = {m2["tool_call_id"] for m2 in messages if m2["role"] == "tool"}
            open_ids = [c["id"] for c in last_calls if c["id"] not in answered]
            if messages[-1]["role"] == "tool":
                prev = next(m2 for m2 in reversed(messages) if m2.get("tool_calls"))
                open_ids = [c["id"] for c in prev["tool_calls"] if c["id"] not in answered]
            if not open_ids:
                continue
            copy["tool_call_id"] = open_ids[0]
        messages.append(copy)
    return messages[: turn_ends(messages)[turns - 1]], tools


def client_requests(
    messages: list[dict[str, Any]], tools: list[dict], model: str, *, clock: bool = True
) -> list[dict[str, Any]]:
    """The body a client sends at each turn; with ``clock`` the system prompt carries the time."""
    out = []
    for turn, end in enumerate(turn_ends(messages), start=1):
        history = [dict(m) for m in messages[:end]]
        if clock:
            history[0]["content"] += (
                f"\nCurrent time: 2026-11-29T10:{turn // 60:02d}:{turn % 60:02d}Z. Request id: req-{turn:06d}-abcdef"
            )
        out.append({"model": model, "messages": history, "tools": tools})
    return out
