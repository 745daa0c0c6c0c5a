"""Agent loops for compaction tests: one task, then many tool rounds, and the rules a forwarded list must keep."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from gateway.assembly.context import Message
from gateway.assembly.verify_assembly import tool_pairing_problems
from tests.assembly.compaction_helpers import COUNTER

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


def _calls_kept(sent: Message, client: Message) -> bool:
    """The same calls in order (ids, types, names); each one's arguments the client's or a gateway stub."""
    before, after = client.get("tool_calls") or [], sent.get("tool_calls") or []
    if len(before) != len(after):
        return False
    for a, b in zip(before, after, strict=True):
        if a == b:
            continue
        if (a["id"], a["type"], a["function"]["name"]) != (b["id"], b["type"], b["function"]["name"]):
            return False
        if not b["function"]["arguments"].startswith('{"cleared":'):
            return False
    return True


def older_round_as_sent(sent: Message, client: Message, cleared: set[str]) -> bool:
    """What an older round of the protected tail may go out as (issue 34, the lead's decision of session 38).

    The client's message; or its result's stub when a ``cleared`` decision names its call; or the assistant
    message with its reasoning condensed (a ``<condensed`` block) and its long arguments stubbed, the same
    calls in the same order, so every call keeps its result."""
    if sent == client:
        return True
    if client.get("role") == "tool":
        stub = str(sent.get("content")).startswith("[result of ")
        return (
            str(client.get("tool_call_id")) in cleared and sent.get("tool_call_id") == client["tool_call_id"] and stub
        )
    if client.get("role") != "assistant" or sent.get("role") != "assistant":
        return False
    text_kept = sent.get("content") == client.get("content") or str(sent.get("content")).startswith("<condensed")
    return text_kept and _calls_kept(sent, client)


def newest_round_as_sent(sent: Sequence[Message], client: Sequence[Message], window: int) -> bool:
    """The newest round goes out verbatim: its calls and results byte for byte; its reasoning may be
    condensed only when the round alone is past a quarter of the window."""
    if list(sent) == list(client):
        return True
    if len(sent) != len(client) or COUNTER.messages(client) <= window / 4:
        return False
    first, rest = sent[0], list(sent[1:])
    condensed = str(first.get("content")).startswith("<condensed") and first.get("tool_calls") == client[0].get(
        "tool_calls"
    )
    return condensed and rest == list(client[1:])
