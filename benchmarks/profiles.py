"""The request bodies the overhead benchmark sends, built from real ToolBench agent runs.

Four profiles, as issue 11 defines them:

- ``tiny``: one short user message;
- ``agent14k``: ~14K prompt tokens, 37 messages, 20 tools;
- ``agent105k``: ~105K prompt tokens, 287 messages (the same 20 tools);
- ``stream``: ``tiny`` with ``stream: true`` (first byte and end measured).

The agent profiles are real: the system prompt and first user goal of a ToolBench run,
then the (assistant tool call, tool result) steps of every ToolBench run in the file,
cycled with fresh call ids until the message count is reached, and the tool results
lengthened with further real tool outputs until the token target is reached. The tools
are the first 20 distinct tool definitions across the runs. Sizes are checked by
``tests/benchmarks/test_profiles.py`` with the gateway's own token counter.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from gateway.tokens import TokenCounter, counter_for
from tests.shared_data import data_path, need

TOOLBENCH = data_path("toolbench.jsonl")
MODEL = "gpt-4o-mini"
TOOL_COUNT = 20


@dataclass(frozen=True, slots=True)
class Profile:
    """One benchmark request: its name, body (already JSON) and whether it streams."""

    name: str
    body: bytes
    stream: bool
    messages: int
    tokens: int


def _runs(path: Path) -> list[dict[str, Any]]:
    return [orjson.loads(line) for line in need(path).read_bytes().splitlines() if line.strip()]


def _tools(runs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    seen: dict[str, dict[str, Any]] = {}
    for run in runs:
        for tool in run["tools"]:
            seen.setdefault(tool["function"]["name"], tool)
    return list(seen.values())[:TOOL_COUNT]


def _steps(runs: list[dict[str, Any]]) -> list[tuple[Mapping[str, Any], list[Mapping[str, Any]]]]:
    """Every assistant tool-call message with the tool results that answer it."""
    steps: list[tuple[Mapping[str, Any], list[Mapping[str, Any]]]] = []
    for run in runs:
        messages = run["messages"]
        for i, m in enumerate(messages):
            if m["role"] != "assistant" or not m.get("tool_calls"):
                continue
            ids = {c["id"] for c in m["tool_calls"]}
            results = [r for r in messages[i + 1 :] if r["role"] == "tool" and r["tool_call_id"] in ids]
            if len(results) == len(ids):
                steps.append((m, results))
    return steps


def _renumbered(step: tuple[Mapping[str, Any], list[Mapping[str, Any]]], n: int) -> list[dict[str, Any]]:
    call, results = step
    rename = {c["id"]: f"call_{n}_{j}" for j, c in enumerate(call["tool_calls"])}
    out: list[dict[str, Any]] = [
        {**call, "tool_calls": [{**c, "id": rename[c["id"]]} for c in call["tool_calls"]]},
    ]
    out += [{**r, "tool_call_id": rename[r["tool_call_id"]]} for r in results]
    return out


def _cycle(items: list[Any]) -> Iterator[tuple[int, Any]]:
    n = 0
    while True:
        for item in items:
            yield n, item
            n += 1


def agent_messages(runs: list[dict[str, Any]], *, messages: int) -> list[dict[str, Any]]:
    """A real agent history of exactly ``messages`` messages, ending with the user's follow-up."""
    first = runs[0]["messages"]
    out: list[dict[str, Any]] = [dict(first[0]), dict(first[1])]
    for n, step in _cycle(_steps(runs)):
        chunk = _renumbered(step, n)
        if len(out) + len(chunk) > messages - 1:
            break
        out += chunk
    while len(out) < messages - 1:  # pad with real user turns (rarely needed)
        out.append({"role": "user", "content": str(first[1]["content"])})
    out.append({"role": "user", "content": "Thanks. Now summarise what you found and call Finish."})
    return out


def _grow_to(messages: list[dict[str, Any]], tools: list[dict[str, Any]], target: int, counter: TokenCounter) -> None:
    """Lengthen tool results with further real tool outputs until the prompt reaches ``target``."""
    outputs = [str(m["content"]) for m in messages if m["role"] == "tool" and m.get("content")]
    slots = [i for i, m in enumerate(messages) if m["role"] == "tool"]
    k = 0
    while counter.request(messages, tools) < target and slots:
        i = slots[k % len(slots)]
        extra = outputs[(k * 7 + 3) % len(outputs)]
        messages[i] = {**messages[i], "content": str(messages[i]["content"]) + "\n" + extra}
        k += 1


def build_agent(name: str, *, messages: int, tokens: int, path: Path = TOOLBENCH) -> Profile:
    runs = _runs(path)
    tools = _tools(runs)
    history = agent_messages(runs, messages=messages)
    counter = counter_for("o200k_base")
    _grow_to(history, tools, tokens, counter)
    body = {"model": MODEL, "messages": history, "tools": tools, "max_tokens": 64}
    return Profile(name, orjson.dumps(body), False, len(history), counter.request(history, tools))


def build_tiny(name: str = "tiny", *, stream: bool = False) -> Profile:
    messages = [{"role": "user", "content": "Say hello in five words."}]
    body: dict[str, Any] = {"model": MODEL, "messages": messages, "max_tokens": 16}
    if stream:
        body["stream"] = True
    return Profile(name, orjson.dumps(body), stream, 1, counter_for("o200k_base").request(messages))


def build_profiles(names: tuple[str, ...] = ("tiny", "agent14k", "agent105k", "stream")) -> list[Profile]:
    """The named profiles, in the order given."""
    makers = {
        "tiny": lambda: build_tiny("tiny"),
        "agent14k": lambda: build_agent("agent14k", messages=37, tokens=14_000),
        "agent105k": lambda: build_agent("agent105k", messages=287, tokens=105_000),
        "stream": lambda: build_tiny("stream", stream=True),
    }
    return [makers[n]() for n in names]


def fresh(body: bytes, k: int) -> bytes:
    """``body`` with every text made new: a first turn of a conversation nobody has counted yet."""
    data = orjson.loads(body)
    for m in data["messages"]:
        if isinstance(m.get("content"), str):
            m["content"] = f"[run {k}] " + m["content"]
    return orjson.dumps(data)
