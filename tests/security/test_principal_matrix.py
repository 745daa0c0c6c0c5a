"""Two tenants, auth on, ``--workers 2``, memory and recall on: through all three doors, with keys as
``Authorization: Bearer``, as ``x-api-key`` and in pass-through mode, with and without
``X-Session-Id``, nothing of A's reaches B (issue 35).

Before admission named one ``Principal`` per request, a key sent as ``x-api-key`` on chat or
Responses was admitted and then scoped as ``anonymous`` (every such key shared sessions, memory
and stored responses: B read, chained from and deleted A's response), and pass-through on
``/v1/messages`` named the caller from the provider key two tenants shared. A here sends its keys
the ways that leaked; B then asks through every door and header; the provider must see none of
A's words in B's prompts, B must get none back, and A's stored response is B's 404.

The tools the gateway serves itself carry state too: a ``find_tools`` search grows the session's
tool set, and ``recall_archive`` reads the session's archive. B, under A's session name, is offered
the tools a fresh session is, and B's served recall never answers with A's passages.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anthropic
import httpx
import openai
import orjson
import pytest

from gateway.api.auth import hash_key
from gateway.assembly.memory_blocks import RECALL_TOOL_NAME
from tests.assembly.tool_fixtures import catalogue
from tests.procs import GatewayHandle, SimHandle, run_gateway, sim_models

KEY_A, KEY_B, ADMIN = "vk-matrix-a-0123456789", "vk-matrix-b-0123456789", "vk-matrix-admin-01234"
CALLER_A, CALLER_B = hash_key(KEY_A)[:12], hash_key(KEY_B)[:12]
PROVIDER_KEY = "sk-shared-provider-key-42"
SYSTEM = "You are a coding assistant."
OPENING = "Scaffold a new service."
FACTS = "I prefer TypeScript. The project uses PostgreSQL 16."
SECRET = "My locker code is 4417 and the spare key is with Marisol at the front desk. "
QUESTION = "Who has the spare key for my locker, and which database do we use?"
#: Words only A ever said: none may appear in what the provider receives for B, or in B's answers.
A_ONLY = ("TypeScript", "PostgreSQL 16", "Marisol", "4417", "<memory", "<recalled")
SESSION = "team-main"
MODEL = "tiny-window"
FILLER = "We went through the sprint board, the retro notes and the on-call rota once more. " * 6
POLICY = {
    "memory": {
        "enabled": True,
        "long_term": True,
        "scope": "owner",
        "recall_budget_tokens": 400,
        "passage_tokens": 120,
    },
    "compaction": {"summary_max_tokens": 150, "keep_recent_turns": 2, "prepare_at": 0.55},
}


def _models(sim: SimHandle) -> list[dict[str, Any]]:
    return [{**sim_models(sim.base_url)[0], "name": MODEL, "context_window": 1500}]


@pytest.fixture(scope="module")
def keyed(sim: SimHandle, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[GatewayHandle, Path]]:
    """Auth on, keys as Bearer or x-api-key."""
    auth = {"enabled": True, "keys": [hash_key(KEY_A), hash_key(KEY_B)], "admin_keys": [hash_key(ADMIN)]}
    tmp = tmp_path_factory.mktemp("gw-matrix-keyed")
    with run_gateway(tmp, {"models": _models(sim), "auth": auth, "policy": POLICY}, workers=2) as handle:
        yield handle, tmp / "ventana.db"


@pytest.fixture(scope="module")
def passthrough(sim: SimHandle, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[GatewayHandle, Path]]:
    """Auth on, pass-through: both tenants send the same provider key, each its own X-Ventana-Key."""
    auth = {"enabled": True, "passthrough": True, "keys": [hash_key(KEY_A), hash_key(KEY_B)]}
    tmp = tmp_path_factory.mktemp("gw-matrix-passthrough")
    with run_gateway(tmp, {"models": _models(sim), "auth": auth, "policy": POLICY}, workers=2) as handle:
        yield handle, tmp / "ventana.db"


def _wait_for(db: Path, sql: str, *args: object) -> None:
    """Memory and records are written off the request path, maybe by the other worker."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        with sqlite3.connect(db) as conn:
            if conn.execute(sql, args).fetchone()[0]:
                return
        time.sleep(0.2)
    raise AssertionError(f"never true: {sql} {args}")


def _credentials(how: str, key: str) -> dict[str, str]:
    """The headers a client sends its key in: ``bearer``, ``x-api-key``, or ``passthrough``."""
    if how == "bearer":
        return {"authorization": f"Bearer {key}"}
    if how == "x-api-key":
        return {"x-api-key": key}
    return {"authorization": f"Bearer {PROVIDER_KEY}", "x-ventana-key": key}


def _chat(gw: GatewayHandle, how: str, key: str, messages: list[dict[str, Any]], session: str | None) -> str:
    """Chat Completions: the openai SDK when the key is a Bearer, plain HTTP for x-api-key."""
    headers = {"x-session-id": session} if session else {}
    if how == "x-api-key":
        r = httpx.post(
            gw.base_url + "/chat/completions",
            json={"model": MODEL, "messages": messages},
            headers={**_credentials(how, key), **headers},
            timeout=60,
        )
        assert r.status_code == 200, r.text
        return str(r.json()["choices"][0]["message"]["content"])
    api_key = PROVIDER_KEY if how == "passthrough" else key
    extra = {"x-ventana-key": key} if how == "passthrough" else {}
    client = openai.OpenAI(base_url=gw.base_url, api_key=api_key, max_retries=0, default_headers=extra)
    got = client.chat.completions.create(model=MODEL, messages=messages, extra_headers=headers)  # type: ignore[arg-type]
    return got.choices[0].message.content or ""


def _respond(gw: GatewayHandle, how: str, key: str, text: str, session: str | None, **extra: Any) -> httpx.Response:
    headers = {**_credentials(how, key), **({"x-session-id": session} if session else {})}
    body = {"model": MODEL, "instructions": SYSTEM, "input": text, **extra}
    return httpx.post(gw.base_url + "/responses", json=body, headers=headers, timeout=60)


def _message(gw: GatewayHandle, how: str, key: str, text: str, session: str | None) -> str:
    """Messages through the Anthropic SDK: ``api_key`` goes out as x-api-key, ``auth_token`` as a Bearer."""
    headers = {"x-session-id": session} if session else {}
    if how == "passthrough":
        client = anthropic.Anthropic(
            base_url=gw.url, api_key=PROVIDER_KEY, max_retries=0, default_headers={"x-ventana-key": key}
        )
    elif how == "x-api-key":
        client = anthropic.Anthropic(base_url=gw.url, api_key=key, max_retries=0)
    else:
        client = anthropic.Anthropic(base_url=gw.url, auth_token=key, max_retries=0)
    got: Any = client.messages.create(
        model=MODEL,
        max_tokens=64,
        system=SYSTEM,
        messages=[{"role": "user", "content": text}],
        extra_headers=headers,
    )
    return str(got.content[0].text)


def _long_session(gw: GatewayHandle, db: Path, how: str) -> None:
    """A holds a session whose middle, with A's secret in it, is compacted and archived."""
    system = {"role": "system", "content": SYSTEM}
    history: list[dict[str, Any]] = [system, {"role": "user", "content": OPENING}]
    history.append({"role": "assistant", "content": _chat(gw, how, KEY_A, history, SESSION)})
    for i in range(10):
        history.append({"role": "user", "content": (SECRET if i == 1 else f"Turn {i}: ") + FILLER})
        history.append({"role": "assistant", "content": _chat(gw, how, KEY_A, history, SESSION)})
    _wait_for(db, "SELECT count(*) FROM memory_passages WHERE text LIKE '%Marisol%'")


def _leaks(sim: SimHandle, answers: list[str]) -> tuple[list[str], list[str]]:
    seen_by_b = orjson.dumps([r["messages"] for r in sim.received()]).decode()
    return [w for w in A_ONLY if w in seen_by_b], [w for w in A_ONLY if any(w in a for a in answers)]


def _tenant_b_everywhere(gw: GatewayHandle, sim: SimHandle, hows: tuple[str, ...]) -> list[str]:
    """B through every door, with each way of sending its key, with A's session id and with none."""
    answers: list[str] = []
    system = {"role": "system", "content": SYSTEM}
    for how in hows:
        for session in (SESSION, None):
            first = _chat(gw, how, KEY_B, [system, {"role": "user", "content": OPENING}], session)
            answers.append(first)
            follow = [system, {"role": "user", "content": OPENING}, {"role": "assistant", "content": first}]
            answers.append(_chat(gw, how, KEY_B, [*follow, {"role": "user", "content": QUESTION}], session))
            r = _respond(gw, how, KEY_B, QUESTION, session)
            assert r.status_code == 200, r.text
            output = r.json()["output"]  # its texts only: ids are random hex, which may spell 4417
            answers.append("".join(str(c.get("text")) for item in output for c in item.get("content") or ()))
            answers.append(_message(gw, how, KEY_B, QUESTION, session))
    return answers


def test_keys_as_bearer_or_x_api_key_share_nothing(keyed: tuple[GatewayHandle, Path], sim: SimHandle) -> None:
    gw, db = keyed
    system = {"role": "system", "content": SYSTEM}
    _chat(gw, "bearer", KEY_A, [system, {"role": "user", "content": FACTS}], "a-facts")
    _wait_for(db, "SELECT count(*) FROM memory_facts WHERE text LIKE '%TypeScript%'")
    _long_session(gw, db, "x-api-key")
    stored = _respond(gw, "x-api-key", KEY_A, "Remember the plan: " + SECRET, "a-responses")
    assert stored.status_code == 200, stored.text
    response_id = stored.json()["id"]

    sim.reset()
    answers = _tenant_b_everywhere(gw, sim, ("bearer", "x-api-key"))
    in_prompts, in_answers = _leaks(sim, answers)
    assert in_prompts == [], "A's words in B's prompts"
    assert in_answers == [], "A's words in B's answers"

    # A's stored response is B's 404 whichever way B sends its key: read, list, chain, delete.
    for how in ("bearer", "x-api-key"):
        b = _credentials(how, KEY_B)
        url = f"{gw.base_url}/responses/{response_id}"
        assert httpx.get(url, headers=b).status_code == 404
        assert httpx.get(url + "/input_items", headers=b).status_code == 404
        chained = _respond(gw, how, KEY_B, "Go on.", None, previous_response_id=response_id)
        assert chained.status_code == 404, chained.text
        assert httpx.delete(url, headers=b).status_code == 404
    a = httpx.get(f"{gw.base_url}/responses/{response_id}", headers=_credentials("x-api-key", KEY_A))
    assert a.status_code == 200 and a.json()["id"] == response_id, "A's response is still A's"

    # Records name each tenant (the inspector groups and filters by them); B's key opens no inspector page.
    _wait_for(db, "SELECT count(*) FROM requests WHERE caller = ? AND session_id = ?", CALLER_A, SESSION)
    with sqlite3.connect(db) as conn:
        callers = {r[0] for r in conn.execute("SELECT DISTINCT caller FROM requests")}
    assert callers <= {CALLER_A, CALLER_B}, f"requests recorded under another caller: {callers}"
    for how in ("bearer", "x-api-key"):
        for path in ("/ui/", f"/ui/sessions/{SESSION}"):
            page = httpx.get(gw.url + path, headers=_credentials(how, KEY_B))
            assert page.status_code == 403 and SESSION not in page.text


def test_passthrough_tenants_sharing_a_provider_key_share_nothing(
    passthrough: tuple[GatewayHandle, Path], sim: SimHandle
) -> None:
    gw, db = passthrough
    _message(gw, "passthrough", KEY_A, FACTS, "a-facts")
    _wait_for(db, "SELECT count(*) FROM memory_facts WHERE text LIKE '%TypeScript%'")
    # A's own session on the Messages door, named, then B sends the same name and the same words.
    assert "TypeScript" in _memory_of(sim, lambda: _message(gw, "passthrough", KEY_A, OPENING, SESSION))
    sim.reset()
    answers = _tenant_b_everywhere(gw, sim, ("passthrough",))
    in_prompts, in_answers = _leaks(sim, answers)
    assert in_prompts == [], "A's words in B's prompts"
    assert in_answers == [], "A's words in B's answers"
    assert all(r.get("model") for r in sim.received())
    _wait_for(db, "SELECT count(*) FROM requests WHERE caller = ?", CALLER_B)
    with sqlite3.connect(db) as conn:
        callers = {r[0] for r in conn.execute("SELECT DISTINCT caller FROM requests")}
    assert callers == {CALLER_A, CALLER_B}, "the gateway key names the caller, never the shared provider key"


def _memory_of(sim: SimHandle, call: Any) -> str:
    """The ``<memory>`` block the provider received for one call."""
    sim.reset()
    call()
    return "".join(
        str(m.get("content"))
        for r in sim.received()
        for m in r["messages"]
        if str(m.get("content")).startswith("<memory")
    )


#: Served tools: pruning to 3 offers ``find_tools``; recall in tool mode offers ``recall_archive``.
SERVED_POLICY = {
    "tools": {"mode": "prune", "max_tools": 3},
    "memory": {"enabled": True, "mode": "tool", "recall_budget_tokens": 400, "passage_tokens": 120},
    "compaction": {"summary_max_tokens": 40, "keep_recent_turns": 2, "prepare_at": 0.55},
}
#: A need no pruned tool fits: the model searches (``tool_choice: required``), the search finds
#: nothing better, and the gateway sends every tool the client offered, which the session keeps.
SEARCH_NEED = "Remind me about the meeting with Laura"
WEATHER = "What's the weather forecast in Paris tomorrow?"


@pytest.fixture(scope="module")
def served(sim: SimHandle, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[GatewayHandle, Path]]:
    """Auth on, keys as Bearer or x-api-key, the gateway's own tools on."""
    auth = {"enabled": True, "keys": [hash_key(KEY_A), hash_key(KEY_B)]}
    tmp = tmp_path_factory.mktemp("gw-matrix-served")
    with run_gateway(tmp, {"models": _models(sim), "auth": auth, "policy": SERVED_POLICY}, workers=2) as handle:
        yield handle, tmp / "ventana.db"


def _offered(body: dict[str, Any]) -> list[str]:
    return [t["function"]["name"] for t in body.get("tools") or ()]


def _with_tools(gw: GatewayHandle, how: str, key: str, texts: list[str], session: str | None, **extra: Any) -> None:
    """One chat request offering the whole catalogue; ``texts`` are the user's turns so far."""
    messages: list[dict[str, Any]] = []
    for text in texts:
        messages += [{"role": "user", "content": text}, {"role": "assistant", "content": "Noted."}]
    headers = {**_credentials(how, key), **({"x-session-id": session} if session else {})}
    body = {"model": MODEL, "messages": messages[:-1], "tools": catalogue(), **extra}
    r = httpx.post(gw.base_url + "/chat/completions", json=body, headers=headers, timeout=60)
    assert r.status_code == 200, r.text


def _archived_session(gw: GatewayHandle, how: str, key: str, session: str, planted: bool) -> list[dict[str, Any]]:
    """Ten turns under ``session``, the first ones compacted and archived; A's hold A's secret."""
    history: list[dict[str, Any]] = [{"role": "system", "content": SYSTEM}]
    for i in range(10):
        text = (SECRET if planted and i == 1 else f"Turn {i}: ") + FILLER
        history += [{"role": "user", "content": text}, {"role": "assistant", "content": "Noted."}]
        _chat(gw, how, key, history, session)
    return history


@pytest.mark.parametrize("how", ["bearer", "x-api-key"])
def test_served_tools_state_never_reaches_the_other_tenant(
    served: tuple[GatewayHandle, Path], sim: SimHandle, how: str
) -> None:
    gw, db = served
    # find_tools: A's search grows A's session's tool set, to every tool (nothing fitted better).
    for session in (f"tools-{how}", None):
        sim.reset()
        _with_tools(gw, how, KEY_A, [SEARCH_NEED], session, tool_choice="required")
        searched, grown = sim.received()
        assert "find_tools" in _offered(searched) and len(_offered(grown)) == len(catalogue()), "A searched"
        sim.reset()
        _with_tools(gw, how, KEY_A, [SEARCH_NEED, WEATHER], session)  # the same conversation, named or not
        assert len(_offered(sim.received()[0])) >= len(catalogue()), "A's session keeps what its search grew"
        sim.reset()
        _with_tools(gw, how, KEY_B, [SEARCH_NEED, WEATHER], session)  # A's session name (or none), B's key
        _with_tools(gw, how, KEY_B, [SEARCH_NEED, WEATHER], f"fresh-{how}-{session}")
        under_a_name, fresh = sim.received()
        assert _offered(under_a_name) == _offered(fresh), "A's find_tools expansion reached B"
        assert len(_offered(fresh)) < len(catalogue())

    # recall_archive: each tenant has an archive under the same session name; B's served recall reads B's.
    session = f"recall-{how}"
    _archived_session(gw, how, KEY_A, session, planted=True)
    _wait_for(db, "SELECT count(*) FROM memory_passages WHERE text LIKE '%Marisol%'")
    sim.reset()  # B under A's session name, with no history of its own there, asks about A's secret
    opening = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": QUESTION}]
    asked = _chat(gw, how, KEY_B, opening, session)
    in_prompts, in_answers = _leaks(sim, [asked])
    assert in_prompts == [] and in_answers == [], "A's archive reached B under A's session name"
    history = _archived_session(gw, how, KEY_B, session, planted=False)
    _wait_for(db, "SELECT count(*) FROM memory_passages WHERE owner = ?", f"caller:{CALLER_B}")
    sim.reset()
    answer = _chat(gw, how, KEY_B, [*history, {"role": "user", "content": QUESTION}], session)
    received = sim.received()
    assert len(received) == 2 and received[1]["messages"][-1]["role"] == "tool", "B's recall was served"
    assert RECALL_TOOL_NAME in _offered(received[0])
    in_prompts, in_answers = _leaks(sim, [answer])
    assert in_prompts == [] and in_answers == [], "A's archive reached B through the served recall"
