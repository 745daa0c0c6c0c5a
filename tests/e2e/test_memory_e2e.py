"""Memory end to end: the openai SDK over real HTTP, a real gateway process, the provider simulator.

Long-term: a fact stated in one session is in the ``<memory>`` block at the start of the
same user's next session, byte-identical across that session's turns, and absent for
another user; ``ventana memory forget`` removes it. Episodic: a detail from a turn that
compaction replaced comes back just before the question, marked with its turn and framed as earlier
conversation, so the question stays the last thing the model reads.
"""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import openai
import pytest

from gateway.memory.llm_facts import FACT_PROMPT
from tests.procs import GatewayHandle, SimHandle, _env, run_gateway, sim_models

SYSTEM = {"role": "system", "content": "You are a coding assistant."}


@pytest.fixture(scope="module")
def memory_gateway(sim: SimHandle, tmp_path_factory: pytest.TempPathFactory) -> Iterator[GatewayHandle]:
    models = [*sim_models(sim.base_url), {**sim_models(sim.base_url)[0], "name": "tiny-window", "context_window": 1500}]
    config = {
        "models": models,
        "policy": {
            "memory": {"long_term": True, "recall_budget_tokens": 400, "passage_tokens": 120},
            "compaction": {"summary_max_tokens": 150, "keep_recent_turns": 2, "prepare_at": 0.55},
        },
    }
    with run_gateway(tmp_path_factory.mktemp("gw-memory"), config) as handle:
        yield handle


def _client(gw: GatewayHandle, key: str) -> openai.OpenAI:
    return openai.OpenAI(base_url=gw.base_url, api_key=key, max_retries=0)


def _ask(client: openai.OpenAI, session: str, messages: list[dict[str, Any]], **extra: Any) -> str:
    got = client.chat.completions.create(
        model="gpt-4o-mini", messages=messages, extra_headers={"x-session-id": session}, **extra
    )
    return got.choices[0].message.content or ""


def _memory_blocks(body: dict[str, Any]) -> list[str]:
    return [str(m["content"]) for m in body["messages"] if str(m.get("content")).startswith("<memory")]


def _cli(gw: GatewayHandle, *args: str) -> subprocess.CompletedProcess[str]:
    config = next(gw.log_path.parent.glob("ventana-*.yaml"))
    cmd = [sys.executable, "-m", "gateway.cli", "memory", *args, "--config", str(config)]
    return subprocess.run(cmd, env=_env(), cwd=gw.log_path.parent, capture_output=True, text=True, timeout=60)


def test_a_fact_follows_its_user_into_the_next_session_only(memory_gateway: GatewayHandle, sim: SimHandle) -> None:
    ana, bob = _client(memory_gateway, "sk-ana-1"), _client(memory_gateway, "sk-bob-1")
    said = {"role": "user", "content": "I prefer TypeScript. The project uses PostgreSQL 16."}
    _ask(ana, "ana-1", [SYSTEM, said])
    sim.reset()
    first = [SYSTEM, {"role": "user", "content": "Scaffold a new service."}]
    answer = _ask(ana, "ana-2", first)
    _ask(ana, "ana-2", [*first, {"role": "assistant", "content": answer}, {"role": "user", "content": "Add tests."}])
    _ask(bob, "bob-1", [SYSTEM, {"role": "user", "content": "Scaffold a new service."}])
    ana_turn1, ana_turn2, bob_turn1 = sim.received()
    block = _memory_blocks(ana_turn1)
    assert len(block) == 1 and "TypeScript" in block[0] and "PostgreSQL 16" in block[0]
    assert ana_turn1["messages"][0] == SYSTEM and ana_turn1["messages"][1]["content"] == block[0]
    assert _memory_blocks(ana_turn2) == block  # frozen: the cached prefix keeps its bytes
    assert _memory_blocks(bob_turn1) == [] and "TypeScript" not in json.dumps(bob_turn1)


def test_a_contradicted_fact_is_updated_and_forget_removes_it(memory_gateway: GatewayHandle, sim: SimHandle) -> None:
    carol = _client(memory_gateway, "sk-carol-1")
    _ask(carol, "carol-1", [SYSTEM, {"role": "user", "content": "Our stack uses PostgreSQL 15."}], user="carol")
    _ask(
        carol, "carol-2", [SYSTEM, {"role": "user", "content": "We moved: our stack uses PostgreSQL 17."}], user="carol"
    )
    listed = _cli(memory_gateway, "list", "--user", "carol", "--json")
    assert listed.returncode == 0, listed.stderr
    facts = json.loads(listed.stdout)["facts"]
    assert [f["text"] for f in facts] == ["The project uses PostgreSQL 17."]
    forgot = _cli(memory_gateway, "forget", "--user", "carol")
    assert forgot.returncode == 0 and "forgot 1 fact" in forgot.stdout
    sim.reset()
    _ask(carol, "carol-3", [SYSTEM, {"role": "user", "content": "Hello again."}], user="carol")
    assert _memory_blocks(sim.received()[-1]) == []


def _compacted_history(client: openai.OpenAI, session: str) -> list[dict[str, Any]]:
    """Twelve turns at the tiny window, sent one by one: turn 2 (the locker's spare key) is compacted and archived."""
    filler = "We went through the sprint board, the retro notes and the on-call rota once more. " * 6
    turns = [f"Turn {i}: {filler}" for i in range(12)]
    turns[1] = "My locker code is 4417 and the spare key is with Marisol at the front desk. " + filler
    history: list[dict[str, Any]] = [SYSTEM]
    for text in turns:
        history.append({"role": "user", "content": text})
        history.append({"role": "assistant", "content": "Noted."})
        client.chat.completions.create(model="tiny-window", messages=history, extra_headers={"x-session-id": session})
    return history


@pytest.mark.parametrize("stream", [False, True])
def test_a_compacted_detail_is_recalled_with_the_question(
    memory_gateway: GatewayHandle, sim: SimHandle, stream: bool
) -> None:
    client = _client(memory_gateway, "sk-dave-1")
    session = f"dave-{stream}"
    history = _compacted_history(client, session)
    sim.reset()
    question = {"role": "user", "content": "Who has the spare key for my locker?"}
    got = client.chat.completions.create(
        model="tiny-window", messages=[*history, question], extra_headers={"x-session-id": session}, stream=stream
    )
    if stream:
        assert "".join(c.choices[0].delta.content or "" for c in got if c.choices)
    received = sim.received()[-1]["messages"]
    assert any(str(m.get("content")).startswith("<summary") for m in received)
    assert received[-1] == question, "the question goes out as sent, last: it is what the model answers"
    recalled = str(received[-2]["content"])
    assert recalled.startswith("<recalled") and "Marisol" in recalled and 'turns="2"' in recalled
    assert "earlier in this conversation (turn 2)" in recalled.split("\n", 1)[0]


def test_a_rewound_conversation_is_not_told_what_was_said_after_its_end(
    memory_gateway: GatewayHandle, sim: SimHandle
) -> None:
    """A client that goes back to before a compacted turn (an edited earlier message, Claude Code's /rewind)
    resends a shorter history under the same session: what was archived from past its end belongs to the
    abandoned branch, and is not given back as "earlier in this conversation"."""
    client = _client(memory_gateway, "sk-dave-1")
    session = "dave-rewound"
    history = _compacted_history(client, session)
    question = {"role": "user", "content": "Who has the spare key for my locker?"}
    sim.reset()
    _ask(client, session, [*history, question])
    assert "Marisol" in str(sim.received()[-1]["messages"][-2]["content"]), "the full history gets it back"
    sim.reset()
    _ask(client, session, [*history[:3], question])  # back to before turn 2, where the key was mentioned
    received = sim.received()[-1]["messages"]
    assert received == [*history[:3], question], "the rewound request goes out as sent"
    assert not any("Marisol" in str(m.get("content")) for m in received)


def test_sessions_whose_long_names_differ_only_at_the_end_keep_apart(
    memory_gateway: GatewayHandle, sim: SimHandle
) -> None:
    """Two names past the 128 characters the store keeps, alike up to their last characters (a run id and its
    window, as a benchmark names its rows): the second session never recalls the first one's archived turns
    as its own, and the client is told two names. Cut to their first 128 characters, they were one session."""
    client = _client(memory_gateway, "sk-fay-1")
    run = "tau2-telecom/ft:gpt-4.1:sierra/[mobile_data_issue]bad_network_preference|bad_vpn|user_abroad|" * 2
    _compacted_history(client, f"{run}-16000")
    sim.reset()
    question = [SYSTEM, {"role": "user", "content": "Who has the spare key for my locker?"}]
    raw = client.chat.completions.with_raw_response.create(
        model="tiny-window", messages=question, extra_headers={"x-session-id": f"{run}-8000"}
    )
    received = json.dumps(sim.received()[-1]["messages"])
    assert "<recalled" not in received and "Marisol" not in received, "another session's turn recalled as this one's"
    named = raw.headers["x-ventana-session-id"]
    assert len(named) <= 128 and named.startswith(run[:100])
    other = client.chat.completions.with_raw_response.create(
        model="tiny-window", messages=question, extra_headers={"x-session-id": f"{run}-16000"}
    )
    assert other.headers["x-ventana-session-id"] != named


def test_a_broken_memory_store_degrades_memory_not_the_request(sim: SimHandle, tmp_path: Path) -> None:
    config = {"models": sim_models(sim.base_url), "policy": {"memory": {"long_term": True}}}
    with run_gateway(tmp_path, config) as gw:
        client = _client(gw, "sk-erin-1")
        _ask(client, "erin-1", [SYSTEM, {"role": "user", "content": "I prefer Go."}])
        with sqlite3.connect(tmp_path / "ventana.db") as db:
            db.execute("DROP TABLE memory_facts")
        answer = _ask(client, "erin-2", [SYSTEM, {"role": "user", "content": "Hello."}])
        assert answer
        assert "memory lookup failed" in gw.log()


def test_the_summariser_model_is_asked_for_facts_off_the_request_path(sim: SimHandle, tmp_path: Path) -> None:
    models = [*sim_models(sim.base_url), {**sim_models(sim.base_url)[0], "name": "summarizer"}]
    policy = {
        "memory": {"long_term": True, "extract_with": "summarizer"},
        "compaction": {"summarizer_model": "summarizer"},
    }
    with run_gateway(tmp_path, {"models": models, "policy": policy}) as gw:
        sim.reset()
        client = _client(gw, "sk-frank-1")
        _ask(client, "frank-1", [SYSTEM, {"role": "user", "content": "I prefer Go."}])
        _ask(client, "frank-2", [SYSTEM, {"role": "user", "content": "Hello."}])  # waits for frank's facts
        asked = [b for b in sim.received() if b["messages"][0]["content"] == FACT_PROMPT]
        assert "user: I prefer Go." in asked[0]["messages"][1]["content"]  # then one call for "Hello."
        chats = [b for b in sim.received() if b["messages"][0] == SYSTEM]
        assert _memory_blocks(chats[0]) == [] and "They prefer Go." in _memory_blocks(chats[1])[0]
