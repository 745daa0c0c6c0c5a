"""Two tenants through the openai SDK, auth on, memory on, ``--workers 2``: nothing of A's reaches B.

Findings 1 and 2 of issue 25: long-term memory was keyed by the client-chosen ``user`` and
session state by the client-chosen ``X-Session-Id``, so key B naming A's user or A's session
read A's facts, A's frozen ``<memory>`` block and A's recalled passages, and was recorded as
a turn of A's session. Tenant B here sends A's session id, A's ``user`` and A's opening
messages; the provider must see none of A's words in B's prompts, B must get none back, and
A's session must go on as if B had never called.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import openai
import orjson
import pytest

from gateway.api.auth import hash_key
from tests.procs import GatewayHandle, SimHandle, run_gateway, sim_models

KEY_A, KEY_B = "vk-tenant-a-0123456789", "vk-tenant-b-0123456789"
CALLER_A, CALLER_B = hash_key(KEY_A)[:12], hash_key(KEY_B)[:12]
SYSTEM = {"role": "system", "content": "You are a coding assistant."}
OPENING = {"role": "user", "content": "Scaffold a new service."}
FACTS = {"role": "user", "content": "I prefer TypeScript. The project uses PostgreSQL 16."}
B_FACTS = {"role": "user", "content": "I prefer Rust. The project uses MySQL 8."}
SECRET_DETAIL = "My locker code is 4417 and the spare key is with Marisol at the front desk. "
#: Words only A ever said: none may appear in what the provider receives for B, or in B's answers.
A_ONLY = ("TypeScript", "PostgreSQL 16", "Marisol", "4417", "<memory", "<recalled")
SESSION = "team-main"
A_TURNS = 10


@pytest.fixture(scope="module")
def tenants(sim: SimHandle, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[GatewayHandle, Path]]:
    models = [*sim_models(sim.base_url), {**sim_models(sim.base_url)[0], "name": "tiny-window", "context_window": 1500}]
    config = {
        "models": models,
        "auth": {"enabled": True, "keys": [hash_key(KEY_A), hash_key(KEY_B)]},
        "policy": {
            "memory": {"enabled": True, "long_term": True, "recall_budget_tokens": 400, "passage_tokens": 120},
            "compaction": {"summary_max_tokens": 150, "keep_recent_turns": 2, "prepare_at": 0.55},
        },
    }
    tmp = tmp_path_factory.mktemp("gw-tenants")
    with run_gateway(tmp, config, workers=2) as handle:
        yield handle, tmp / "ventana.db"


def _ask(client: openai.OpenAI, messages: list[dict[str, Any]], session: str | None, **extra: Any) -> str:
    headers = {"x-session-id": session} if session else {}
    got = client.chat.completions.create(model="tiny-window", messages=messages, extra_headers=headers, **extra)
    return got.choices[0].message.content or ""


def _wait_for(db: Path, sql: str, *args: object) -> None:
    """Memory is written off the request path, maybe by the other worker: wait until it is there."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        with sqlite3.connect(db) as conn:
            if conn.execute(sql, args).fetchone()[0]:
                return
        time.sleep(0.2)
    raise AssertionError(f"never true: {sql} {args}")


def _turns(db: Path, caller: str) -> list[int]:
    with sqlite3.connect(db) as conn:
        rows = conn.execute(
            "SELECT turn FROM requests WHERE caller = ? AND session_id = ? ORDER BY created_at", (caller, SESSION)
        )
        return [r[0] for r in rows]


def _memory_blocks(messages: list[dict[str, Any]]) -> list[str]:
    return [str(m["content"]) for m in messages if str(m.get("content")).startswith("<memory")]


def _tenant_a(client: openai.OpenAI, db: Path, sim: SimHandle) -> tuple[list[dict[str, Any]], list[str]]:
    """A states facts, then holds a long session whose first turn carries them and whose middle is archived."""
    _ask(client, [SYSTEM, FACTS], "a-facts", user="alice")
    _wait_for(db, "SELECT count(*) FROM memory_facts WHERE text LIKE '%TypeScript%'")
    sim.reset()
    filler = "We went through the sprint board, the retro notes and the on-call rota once more. " * 6
    history: list[dict[str, Any]] = [SYSTEM, OPENING]
    history.append({"role": "assistant", "content": _ask(client, history, SESSION, user="alice")})
    block = _memory_blocks(sim.received()[0]["messages"])
    assert len(block) == 1 and "TypeScript" in block[0], "A's facts reach A's next session"
    for i in range(A_TURNS):
        history.append({"role": "user", "content": (SECRET_DETAIL if i == 1 else f"Turn {i}: ") + filler})
        history.append({"role": "assistant", "content": _ask(client, history, SESSION, user="alice")})
    _wait_for(db, "SELECT count(*) FROM memory_passages WHERE text LIKE '%Marisol%'")
    return history, block


def test_tenant_b_gets_nothing_of_tenant_a(tenants: tuple[GatewayHandle, Path], sim: SimHandle) -> None:
    gw, db = tenants
    a = openai.OpenAI(base_url=gw.base_url, api_key=KEY_A, max_retries=0)
    b = openai.OpenAI(base_url=gw.base_url, api_key=KEY_B, max_retries=0)
    history, block = _tenant_a(a, db, sim)
    a_turns = 1 + A_TURNS  # A's requests in SESSION so far

    sim.reset()
    answers = []
    question = {"role": "user", "content": "Who has the spare key for my locker, and which database do we use?"}
    for session in (SESSION, None):  # A's session id, then no header at all
        first = _ask(b, [SYSTEM, OPENING], session, user="alice")
        answers += [first, _ask(b, [SYSTEM, OPENING, {"role": "assistant", "content": first}, question], session)]
    reply = b.chat.completions.with_raw_response.create(
        model="tiny-window", messages=[SYSTEM, B_FACTS], user="alice", extra_headers={"x-session-id": SESSION}
    )
    assert reply.headers["x-ventana-session-id"] == SESSION, "B keeps its own name for its session"
    answers.append(reply.parse().choices[0].message.content or "")
    seen_by_b = orjson.dumps([r["messages"] for r in sim.received()]).decode()
    assert [w for w in A_ONLY if w in seen_by_b] == [], "A's words in B's prompts"
    assert [w for w in A_ONLY if any(w in text for text in answers)] == [], "A's words in B's answers"
    _wait_for(db, "SELECT count(*) FROM memory_facts WHERE text LIKE '%MySQL%'")

    # A's session goes on untouched: consecutive turns, the memory block it had, none of B's facts.
    sim.reset()
    _ask(a, [*history, {"role": "user", "content": "Add tests."}], SESSION, user="alice")
    _ask(a, [SYSTEM, OPENING], "a-later", user="alice")
    # records are written off the request path: wait until every one is in
    _wait_for(
        db, "SELECT count(*) = ? FROM requests WHERE caller = ? AND session_id = ?", a_turns + 1, CALLER_A, SESSION
    )
    _wait_for(db, "SELECT count(*) = 3 FROM requests WHERE caller = ? AND session_id = ?", CALLER_B, SESSION)
    assert _turns(db, CALLER_A) == list(range(1, a_turns + 2))
    assert _turns(db, CALLER_B) == [1, 2, 3], "B's requests are turns of B's own session"
    continued, later = (r["messages"] for r in sim.received())
    assert _memory_blocks(continued) == block, "A's frozen block, byte for byte"
    assert "TypeScript" in "".join(_memory_blocks(later)) and "MySQL" not in orjson.dumps(later).decode()
