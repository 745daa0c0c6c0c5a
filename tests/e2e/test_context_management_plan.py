"""One plan when the client's context management and the gateway's policy both want to compact: the client's
terms (Anthropic's ``keep`` and ``exclude_tools``, OpenAI's ``compact_threshold``) are written into the
gateway's policy for the request, and the record holds one ``context_management`` decision naming both sides.
The simulator's chat route is the upstream; its record is what the model read."""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anthropic
import openai
import pytest

from tests.procs import GatewayHandle, SimHandle, run_gateway, sim_models

SCHEMA = {"type": "object", "properties": {"path": {"type": "string"}}}
TOOLS = [{"name": n, "description": f"{n} tool", "input_schema": SCHEMA} for n in ("run_tests", "read_file")]


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("plan-store") / "store.db"


@pytest.fixture(scope="module")
def gateway(sim: SimHandle, store: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[GatewayHandle]:
    config = {"models": sim_models(sim.base_url), "database_url": f"sqlite:///{store}"}
    with run_gateway(tmp_path_factory.mktemp("gw-plan"), config) as handle:
        yield handle


def _plans(store: Path, gw: GatewayHandle, api: str) -> list[dict[str, Any]]:
    """The stored ``context_management`` decisions for ``api``'s requests, oldest first (the writer flushes
    within a second)."""
    for _ in range(50):
        with sqlite3.connect(store) as db:
            rows = db.execute("select decisions from requests order by created_at").fetchall()
        plans = [d for (raw,) in rows for d in json.loads(raw) if d["pass"] == "context_management"]
        plans = [d for d in plans if d["detail"]["client"]["api"] == api]
        if plans:
            return plans
        time.sleep(0.2)
    raise AssertionError("no context_management decision was stored\n" + gw.log()[-2000:])


def _loop(uses: int) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = [{"role": "user", "content": "Find why the build fails."}]
    for n in range(uses):
        name = "run_tests" if n == 0 else "read_file"
        messages.append({"role": "assistant", "content": [
            {"type": "tool_use", "id": f"toolu_{n:02d}", "name": name, "input": {"path": f"src/m{n}.py"}}]})
        messages.append({"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": f"toolu_{n:02d}", "content": f"result {n}: " + "text " * 450}]})
    return messages


def test_anthropic_keep_and_exclude_tools_bind_the_gateways_own_clearing(
    gateway: GatewayHandle, sim: SimHandle, store: Path
) -> None:
    """12 results of ~450 tokens are over the gateway's threshold (55 % of 8,000); the client's edit clears all
    but the newest 8 (run_tests excluded), which is still over, so the gateway compacts too, and with the
    client's terms: the newest 8 results and run_tests' stay as they were."""
    client = anthropic.Anthropic(base_url=gateway.url, api_key="sk-plan", max_retries=0)
    sim.reset()
    edit = {"type": "clear_tool_uses_20250919", "trigger": {"type": "input_tokens", "value": 3000},
            "keep": {"type": "tool_uses", "value": 8}, "exclude_tools": ["run_tests"]}
    reply = client.beta.messages.create(
        model="small-window", max_tokens=64, messages=_loop(12), tools=TOOLS,  # type: ignore[arg-type]
        context_management={"edits": [edit]},  # type: ignore[list-item]
        betas=["context-management-2025-06-27"],
    )
    assert reply.context_management is not None and reply.context_management.applied_edits
    results = {m["tool_call_id"]: str(m["content"]) for m in sim.received()[-1]["messages"] if m["role"] == "tool"}
    for n in range(4, 12):
        assert results[f"toolu_{n:02d}"].startswith(f"result {n}: text"), "the client's keep: the newest 8 whole"
    plan = _plans(store, gateway, "messages")[-1]
    assert plan["action"] == "client_and_gateway", plan
    client_side, gateway_side = plan["detail"]["client"], plan["detail"]["gateway"]
    assert client_side["api"] == "messages" and client_side["params"]["edits"][0]["keep"]["value"] == 8
    assert client_side["applied_edits"][0]["cleared_tool_uses"] == 3
    assert gateway_side["configured"]["keep_recent_rounds"] == 4 and gateway_side["planned"]["keep_recent_rounds"] == 8
    assert gateway_side["planned"]["never_clear"] == ["run_tests"] and gateway_side["planned"]["keep_tool_results"] == 8
    assert {"pass": "compact_history", "action": "compacted"} in gateway_side["passes"], "older rounds summarised"
    assert gateway_side["configured"]["threshold_tokens"] == 4400 == gateway_side["planned"]["threshold_tokens"]


def test_the_clients_compact_threshold_is_the_gateways_for_the_request(
    gateway: GatewayHandle, sim: SimHandle, store: Path
) -> None:
    client = openai.OpenAI(base_url=gateway.base_url, api_key="sk-plan-responses", max_retries=0)
    items: list[Any] = [{"role": "user", "content": "Plan the move. The vault combination is 31-07-1987."}]
    for turn in range(30):
        items += [{"role": "assistant", "content": f"Step {turn}: pack room {turn} and label every box."},
                  {"role": "user", "content": f"Room {turn} is done; the movers come at {8 + turn % 9}:00."}]
    sim.reset()
    reply = client.responses.create(
        model="small-window", input=items,
        context_management=[{"type": "compaction", "compact_threshold": 900}],  # type: ignore[arg-type]
    )
    assert reply.output[0].type == "compaction"
    plan = _plans(store, gateway, "responses")[-1]
    assert plan["detail"]["client"]["params"] == {"type": "compaction", "compact_threshold": 900}
    assert plan["detail"]["client"]["compacted"] is True
    assert plan["detail"]["client"]["tokens_before"] > 900 >= plan["detail"]["client"]["tokens_after"]
    gateway_side = plan["detail"]["gateway"]
    assert gateway_side["configured"]["threshold_tokens"] == 4400
    assert gateway_side["planned"]["threshold_tokens"] == 900, "the client's threshold is the gateway's too"
    assert plan["action"] == "client", "under the planned threshold after the client's compaction: one compaction"
