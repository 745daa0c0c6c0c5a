"""Replay mode answers with what the real agent did, through the gateway, and counts hidden tools.

Driven by real trajectories from ``tests/data/agent_loops/``: a client resends each
transcript's history turn by turn (with the real tool results) and must receive the
transcript's real next assistant message every time.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import openai
import orjson
import pytest

from gateway.providersim.choose_tool import SEARCH_TOOL
from gateway.providersim.replay import Replayer, Transcript, load_transcripts
from tests.procs import GatewayHandle, SimHandle, run_gateway, run_simulator, sim_models
from tests.shared_data import data_path

#: A tool set too small for the whole task, so pruning hides a tool the agent needs later.
#: Pruning forced on a small catalogue, with no tool search to recover: the misses the replay must count.
TIGHT = {
    "max_tools": 3,
    "min_tools": 1,
    "grow_top": 0,
    "max_set_tools": 3,
    "mode": "prune",
    "min_tool_tokens": 0,
    "find_tools": False,
}
SOLO = data_path("agent_loops", "tau2_telecom_solo.jsonl")
#: Runs with user turns: the gateway scores tools against user text, so only these get pruned.
DEFAULT = data_path("agent_loops", "tau2_telecom_default.jsonl")


def _rows(path: Path) -> list[dict[str, Any]]:
    return [orjson.loads(line) for line in path.read_bytes().splitlines() if line.strip()]


def _pick(rows: list[dict[str, Any]], low: int, high: int) -> dict[str, Any]:
    """The first run with ``low``..``high`` assistant turns (small enough for a test, with tool rounds)."""
    return next(r for r in rows if low <= sum(m["role"] == "assistant" for m in r["messages"]) <= high)


def _turns(row: dict[str, Any]) -> list[int]:
    return [k for k, m in enumerate(row["messages"]) if m["role"] == "assistant"]


def _tool(name: str, description: str = "") -> dict[str, Any]:
    params = {"type": "object", "properties": {"query": {"type": "string"}}, "required": ["query"]}
    return {"type": "function", "function": {"name": name, "description": description, "parameters": params}}


@pytest.fixture(scope="module")
def solo() -> list[Transcript]:
    return load_transcripts(SOLO)


def test_every_turn_of_every_file_is_found_with_the_middle_compacted(solo: list[Transcript]) -> None:
    """Each request is the transcript so far with its middle replaced by a summary, as compaction does."""
    replayer = Replayer(solo)
    by_id = {t.id: t for t in solo}
    for t in solo:  # the subset: 3 tasks, each run by both models
        tools = [_tool(n, d) for n, d in t.tools.items()]
        for k in _turns({"messages": t.messages}):
            history = t.messages[:k]
            if len(history) > 8:  # keep the edges, fold the middle (never split a call from its results)
                cut = next(i for i in range(len(history) - 4, 0, -1) if history[i]["role"] == "assistant")
                summary = {"role": "user", "content": "<summary>earlier turns</summary>"}
                history = [history[0], summary, *history[cut:]]
            verdict = replayer.answer({"messages": history, "tools": tools})
            assert verdict.outcome == "replayed", (t.id, k)
            if verdict.transcript != t.id:  # runs of one task share their opening: either run is right
                assert by_id[verdict.transcript or ""].messages[:k] == t.messages[:k], (t.id, k)
                continue
            assert verdict.message == t.messages[k], (t.id, k)


def test_a_hidden_tool_is_searched_for_once_then_counted_as_a_miss(solo: list[Transcript]) -> None:
    t = next(t for t in solo if any(m.get("tool_calls") for m in t.messages))
    k = next(k for k, m in enumerate(t.messages) if m.get("tool_calls"))
    needed = t.messages[k]["tool_calls"][0]["function"]["name"]
    others = [_tool(n, d) for n, d in t.tools.items() if n != needed]
    replayer = Replayer(solo)
    body = {"messages": t.messages[:k], "tools": [*others, _tool(SEARCH_TOOL, "Find tools")]}
    searched = replayer.answer(body)
    assert searched.outcome == "find_tools" and searched.missing == (needed,)
    call = (searched.message or {})["tool_calls"][0]["function"]
    assert call["name"] == SEARCH_TOOL and orjson.loads(call["arguments"]) == {"query": t.tools[needed]}
    after = [*body["messages"], searched.message, {"role": "tool", "tool_call_id": "x", "content": "no match"}]
    again = replayer.answer({**body, "messages": after})
    assert again.outcome == "miss" and again.message == t.messages[k], "answered as the transcript does"
    assert replayer.answer({"messages": t.messages[:k], "tools": others}).outcome == "miss"
    assert replayer.stats()["counts"] == {"find_tools": 1, "miss": 2}
    assert replayer.stats()["misses"][0] == {"transcript": t.id, "turn": k, "tools": [needed]}


@pytest.fixture(scope="module")
def replay_stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[SimHandle, GatewayHandle, dict[str, Any]]]:
    tmp = tmp_path_factory.mktemp("replay")
    row = _pick(_rows(DEFAULT), 10, 16)
    path = tmp / "one.jsonl"
    path.write_bytes(orjson.dumps(row) + b"\n")
    with run_simulator(tmp, replay=path) as sim:
        config = {"models": sim_models(sim.base_url), "policy": {"tools": TIGHT}}
        with run_gateway(tmp, config) as gw:
            yield sim, gw, row


def test_the_gateway_client_receives_the_real_turns_and_misses_are_counted(
    replay_stack: tuple[SimHandle, GatewayHandle, dict[str, Any]],
) -> None:
    sim, gw, row = replay_stack
    client = openai.OpenAI(base_url=gw.base_url, api_key="sk-client", max_retries=0)
    for k in _turns(row):
        got = client.chat.completions.create(
            model="gpt-4o-mini",
            messages=row["messages"][:k],
            tools=row["tools"],
            extra_headers={"x-session-id": "replay-" + row["id"]},
        )
        real = row["messages"][k]
        message = got.choices[0].message
        assert message.content == real.get("content"), k
        assert [c.model_dump() for c in message.tool_calls or []] == (real.get("tool_calls") or []), k
    hidden = []
    for body, k in zip(sim.received(), _turns(row), strict=True):
        offered = {t["function"]["name"] for t in body.get("tools") or []}
        names = [c["function"]["name"] for c in row["messages"][k].get("tool_calls") or []]
        if any(n not in offered for n in names):
            hidden.append(k)
    stats = httpx.get(sim.url + "/sim/stats").json()["replay"]
    assert stats["counts"].get("unmatched", 0) == 0
    sizes = [len(b.get("tools") or []) for b in sim.received()]
    assert stats["counts"].get("miss", 0) == len(hidden) > 0, f"pruning hid a tool the agent needed ({sizes})"
    assert [m["turn"] for m in stats["misses"]] == hidden
    recorded = Path(str(sim.record_path) + ".misses").read_bytes().splitlines()
    assert [orjson.loads(line) for line in recorded] == stats["misses"], "misses are recorded beside --record"
    assert stats["counts"]["replayed"] == len(_turns(row)) - len(hidden)
