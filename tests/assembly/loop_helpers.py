"""Agent loops for compaction tests: one task, then many tool rounds, and the rules a forwarded list must keep."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from gateway.assembly.context import Message
from gateway.assembly.verify_assembly import tool_pairing_problems

LOOP_SYSTEM = "You are a coding agent. Work in /repo. Call one tool per step until the task is done."
LOOP_TASK = "Task: find why test_parse_dates fails in /repo/tests/test_dates.py and fix it."


def loop_round(k: int, *, parallel: int = 1, words: int = 120, argument_words: int = 0) -> list[dict[str, Any]]:
    """One round: the assistant calls ``parallel`` tools, each answers with a file-like result.

    ``argument_words``: the calls also carry that many words of file content (a write, not a read)."""
    ids = [f"call_{k}_{j}" for j in range(parallel)]
    content = f', "content": "{"x = 1; " * argument_words}"' if argument_words else ""
    calls = [
        {
            "id": i,
            "type": "function",
            "function": {"name": "read_file", "arguments": f'{{"path": "/repo/src/mod_{k}_{j}.py"{content}}}'},
        }
        for j, i in enumerate(ids)
    ]
    out: list[dict[str, Any]] = [{"role": "assistant", "content": f"Reading module {k}.", "tool_calls": calls}]
    for j, i in enumerate(ids):
        body = f"# /repo/src/mod_{k}_{j}.py id=OBJ-{k:04d}{j}\n" + "def handler(x):\n    return x + 1\n" * (words // 8)
        if k % 7 == 3:
            body += f"\nValueError: invalid date '2026-13-{k % 28:02d}' in row {k}\n"
        out.append({"role": "tool", "tool_call_id": i, "content": body})
    return out


def agent_loop(rounds: int, *, task_in_system: bool = False, **kw: Any) -> list[dict[str, Any]]:
    """A single-task loop: system prompt, the task (or none: the task is in the system prompt), rounds."""
    head: list[dict[str, Any]]
    if task_in_system:
        head = [{"role": "system", "content": f"{LOOP_SYSTEM}\n{LOOP_TASK}"}]
    else:
        head = [{"role": "system", "content": LOOP_SYSTEM}, {"role": "user", "content": LOOP_TASK}]
    out = list(head)
    for k in range(rounds):
        out += loop_round(k, **kw)
    return out


def anthropic_problems(messages: Sequence[Message]) -> list[str]:
    """What Anthropic's Messages API would refuse once litellm translated ``messages``.

    litellm moves system messages to the ``system`` parameter, sends tool results as user
    ``tool_result`` blocks, and merges consecutive same-role messages; what remains must
    start with a user turn, alternate, and answer every ``tool_use`` in the very next turn.
    """
    turns: list[tuple[str, list[Message]]] = []
    for m in messages:
        role = m.get("role")
        if role in ("system", "developer"):
            continue
        side = "assistant" if role == "assistant" else "user"
        if turns and turns[-1][0] == side:
            turns[-1][1].append(m)
        else:
            turns.append((side, [m]))
    problems = []
    if turns and turns[0][0] != "user":
        problems.append("the first non-system message is not a user turn")
    for k, (side, group) in enumerate(turns):
        if side != "assistant":
            continue
        wanted = {str(c.get("id")) for m in group for c in m.get("tool_calls") or ()}
        answered = (
            {str(m.get("tool_call_id")) for m in turns[k + 1][1] if m.get("role") == "tool"}
            if k + 1 < len(turns)
            else set()
        )
        if wanted - answered:
            problems.append(f"tool_use {sorted(wanted - answered)} not answered in the next turn")
    return problems


def openai_problems(messages: Sequence[Message]) -> list[str]:
    """What OpenAI's Chat Completions would refuse: a valid role, and every tool message right after its call."""
    problems = [
        f"message {i} has role {m.get('role')!r}"
        for i, m in enumerate(messages)
        if m.get("role") not in ("system", "developer", "user", "assistant", "tool")
    ]
    return problems + tool_pairing_problems(messages)
