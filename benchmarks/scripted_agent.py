"""A scripted agent conversation with planted facts, for compaction tests and benchmarks.

Each turn is a user request, an assistant ``tool_calls`` message, the tool result and
the assistant's reply. Every ``every``-th turn plants one fact (a name, a number, a
date, an identifier, a path) in the user message or the tool result; the other turns
carry realistic filler (result lists with incidental ids). The final question asks for
every planted fact, so "is the answer still in the context" is a substring check.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any

SYSTEM = "You are a travel operations agent. Use the tools. Never invent booking references."
GOAL = "Goal: organise the spring offsite for the Lisbon team and keep track of every booking and decision."
TOOLS: list[dict[str, Any]] = [
    {
        "type": "function",
        "function": {
            "name": name,
            "description": desc,
            "parameters": {"type": "object", "properties": {"query": {"type": "string"}}, "required": ["query"]},
        },
    }
    for name, desc in (
        ("search_flights", "Search flights between two airports"),
        ("lookup_booking", "Read a booking by reference"),
        ("read_file", "Read a file from the project workspace"),
    )
]

_FIRST = ["Dana", "Tomás", "Ingrid", "Kwame", "Mei", "Rafael", "Olga", "Sanjay", "Lucía", "Noor"]
_LAST = ["Whitfield", "Okafor", "Lindqvist", "Moreau", "Tanaka", "Herrera", "Novak", "Brennan", "Castro", "Iqbal"]
_CITIES = ["Lisbon", "Porto", "Madrid", "Oslo", "Accra", "Kyoto", "Quito", "Riga", "Tunis", "Perth"]


@dataclass(frozen=True, slots=True)
class Fact:
    turn: int
    sentence: str
    value: str  # the literal the final answer needs
    where: str  # "user" or "tool"


def _fact(rng: random.Random, turn: int, k: int) -> Fact:
    name = f"{_FIRST[k % 10]} {_LAST[(k * 7 + 3) % 10]}"
    kind = k % 5
    if kind == 0:
        value = f"QX-{rng.randint(10000, 99999)}"
        return Fact(turn, f"The booking reference for {name} is {value}.", value, "tool")
    if kind == 1:
        value = f"2026-{rng.randint(3, 6):02d}-{rng.randint(1, 28):02d}"
        return Fact(turn, f"{name} must arrive in {_CITIES[k % 10]} on {value}, decided with finance.", value, "user")
    if kind == 2:
        value = f"{rng.randint(1000, 9999)}.{rng.randint(10, 99)} EUR"
        return Fact(turn, f"Approved budget line for {name}: {value}.", value, "tool")
    if kind == 3:
        value = f"/srv/offsite/rooming-{rng.randint(100, 999)}.csv"
        return Fact(turn, f"The rooming list for {name} is stored at {value}.", value, "tool")
    value = f"TK{rng.randint(100000, 999999)}"
    return Fact(turn, f"Ticket {value} belongs to {name}; keep it open until the refund clears.", value, "user")


def _filler_result(rng: random.Random, turn: int) -> str:
    rows = []
    for _ in range(4):
        carrier = rng.choice(["TP", "IB", "LH", "AF"])
        rows.append(
            f'{{"flight": "{carrier}{rng.randint(100, 999)}", "seats": "several", "status": "scheduled", '
            f'"note": "standard fare, changes allowed with a fee, baggage included on this route"}}'
        )
    return "[" + ", ".join(rows) + "]"


def scripted_turns(turns: int = 200, facts: int = 40, seed: int = 7) -> tuple[list[list[dict[str, Any]]], list[Fact]]:
    """Return the messages each turn adds (the first turn includes system + goal) and the planted facts."""
    rng = random.Random(seed)
    every = max(1, turns // facts) if facts else turns + 1
    planted: list[Fact] = []
    out: list[list[dict[str, Any]]] = []
    for t in range(turns):
        fact = _fact(rng, t, len(planted)) if facts and t % every == 0 and len(planted) < facts else None
        if fact:
            planted.append(fact)
        user = f"Turn {t}: please check the next item on the offsite list and tell me what changed."
        if fact and fact.where == "user":
            user += " " + fact.sentence
        tool = "lookup_booking" if fact else "search_flights"
        result = _filler_result(rng, t)
        if fact and fact.where == "tool":
            result = f'{{"record": "{fact.sentence}", "source": "ops-db"}} ' + result
        call_id = f"call_{t:04d}"
        step = [
            {"role": "user", "content": user},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": call_id,
                        "type": "function",
                        "function": {"name": tool, "arguments": f'{{"query": "item {t}"}}'},
                    }
                ],
            },
            {"role": "tool", "tool_call_id": call_id, "content": result},
        ]
        if t == 0:
            step = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": GOAL}, *step]
        out.append(step)
    return out, planted


def final_question(facts: list[Fact]) -> dict[str, str]:
    return {
        "role": "user",
        "content": "Final check: list every booking reference, date, budget line, file path and ticket we "
        f"recorded for the {len(facts)} people involved.",
    }


def facts_present(facts: list[Fact], messages: list[dict[str, Any]]) -> float:
    """Share of planted fact values that appear literally somewhere in ``messages``."""
    text = "\n".join(str(m.get("content") or "") + str(m.get("tool_calls") or "") for m in messages)
    return sum(f.value in text for f in facts) / len(facts) if facts else 1.0
