"""Requests with known needed tools, derived from the public data (``tests.shared_data.data_dir``).

- BFCL and MetaTool: the last assistant message is the answer key; it is stripped to get
  the request, and ``meta.expected_functions`` are the tools pruning must keep.
- ToolBench: real multi-turn runs; cutting before each assistant message gives a request,
  and the tools that message called are the ones needed next.
- Sessions: MetaTool's multi-tool queries chained into conversations over the same 47
  tools (each turn: a query, the expected calls, their results, a short answer), to
  replay pruning across turns through the prefix-cache accounting.
"""

from __future__ import annotations

import json
import random
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from tests.shared_data import data_dir, need


@dataclass(frozen=True)
class ToolCase:
    id: str
    tools: list[dict[str, Any]]
    messages: list[dict[str, Any]]
    expected: frozenset[str]


def _rows(name: str) -> Iterator[dict[str, Any]]:
    with need(data_dir() / name).open(encoding="utf-8") as fh:
        for line in fh:
            if line.strip():
                yield json.loads(line)


def selection_cases(name: str) -> list[ToolCase]:
    """BFCL or MetaTool cases: request without the answer key, and the expected functions."""
    cases = []
    for row in _rows(name):
        messages = row["messages"]
        if row["meta"].get("last_message_is_ground_truth"):
            messages = messages[:-1]
        cases.append(ToolCase(row["id"], row["tools"], messages, frozenset(row["meta"]["expected_functions"])))
    return cases


#: Parts of ``split_cases``: tune hyperparameters on "tune", report "heldout" (and "all").
SPLITS = ("all", "tune", "heldout")


def split_cases(cases: list[ToolCase], part: str) -> list[ToolCase]:
    """The declared tuning / held-out split: cases grouped by their needed-tool set, alternate groups.

    MetaTool asks for each tool pair about six times in a row with reworded queries, so an
    even/odd split by case would tune on near-copies of the held-out queries. Groups in order
    of first appearance: even-numbered groups are "tune", odd-numbered ones "heldout".
    """
    if part == "all":
        return cases
    if part not in SPLITS:
        raise ValueError(f"split {part!r} is unknown; expected one of {list(SPLITS)}")
    groups = list(dict.fromkeys(c.expected for c in cases))
    parity = 0 if part == "tune" else 1
    return [c for c in cases if groups.index(c.expected) % 2 == parity]


def toolbench_cases() -> list[ToolCase]:
    """One case per assistant message of each ToolBench run: the history before it, and what it called."""
    cases = []
    for row in _rows("toolbench.jsonl"):
        messages = row["messages"]
        offered = {t["function"]["name"] for t in row["tools"]}
        for i, m in enumerate(messages):
            called = {c["function"]["name"] for c in m.get("tool_calls") or ()} if m["role"] == "assistant" else set()
            needed = called & offered  # the recorded model once called a tool it was never offered
            if needed:
                cases.append(ToolCase(f"{row['id']}#{i}", row["tools"], messages[:i], frozenset(needed)))
    return cases


def toolbench_runs() -> list[list[ToolCase]]:
    """ToolBench runs as sessions: the cases of one run, in order."""
    runs: dict[str, list[ToolCase]] = {}
    for case in toolbench_cases():
        runs.setdefault(case.id.split("#")[0], []).append(case)
    return list(runs.values())


def metatool_sessions(n_sessions: int, turns: int, seed: int = 7) -> list[list[ToolCase]]:
    """Conversations chaining MetaTool multi-tool queries over its fixed 47-tool catalogue."""
    pool = [c for c in selection_cases("metatool.jsonl") if len(c.tools) == 47]
    rng = random.Random(seed)
    sessions = []
    for s in range(n_sessions):
        picked = rng.sample(pool, turns)
        history: list[dict[str, Any]] = [{"role": "system", "content": SYSTEM_PROMPT}]
        session = []
        for t, case in enumerate(picked):
            history = [*history, case.messages[-1]]
            session.append(ToolCase(f"session{s}/turn{t}", case.tools, history, case.expected))
            history = history + _answer(f"s{s}t{t}", sorted(case.expected))
        sessions.append(session)
    return sessions


SYSTEM_PROMPT = (
    "You are a helpful assistant with access to many tools. Pick the tool that fits the user's "
    "request, call it, and answer briefly from its result. Never invent tool results."
)


def _answer(prefix: str, names: list[str]) -> list[dict[str, Any]]:
    calls = [
        {"id": f"{prefix}_{i}", "type": "function", "function": {"name": n, "arguments": "{}"}}
        for i, n in enumerate(names)
    ]
    results = [
        {"role": "tool", "tool_call_id": c["id"], "content": f"{c['function']['name']} returned its data."}
        for c in calls
    ]
    return [
        {"role": "assistant", "content": None, "tool_calls": calls},
        *results,
        {"role": "assistant", "content": "Done."},
    ]
