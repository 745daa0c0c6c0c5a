"""Every request through a real gateway process lands in the store, failures included, never the key."""

from __future__ import annotations

import hashlib
from pathlib import Path

import httpx
import openai
import pytest
from sqlalchemy import Engine

from gateway.store.engine import make_engine
from gateway.store.migrate import upgrade
from gateway.store.queries import get_request, list_requests
from tests.procs import SimHandle, run_gateway, sim_models
from tests.store.databases import postgres_database

KEY = "sk-live-Zq8mN3vT7pR2wX9yK4hJ6"
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": "Current weather for a city",
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
        },
    }
]


def _config(sim: SimHandle, database_url: str) -> dict:
    return {
        "database_url": database_url,
        "models": sim_models(sim.base_url),
        "upstream": {"max_retries": 0},
        "store": {"redact": [r"[\w.+-]+@[\w-]+\.[\w.]+"]},
    }


def _traffic(base_url: str, sim: SimHandle) -> list[str]:
    """Send a mix of requests; return the session id each was sent under, in order."""
    client = openai.OpenAI(base_url=base_url, api_key=KEY, max_retries=0)
    sessions = []

    def session(name: str) -> dict:
        sessions.append(name)
        return {"extra_headers": {"X-Session-Id": name}}

    user = [{"role": "user", "content": "Plan a trip to Lima, mail me at ana@example.com"}]
    for i in range(3):
        client.chat.completions.create(
            model="gpt-4o-mini", messages=[*user, {"role": "user", "content": str(i)}], **session(f"plain-{i}")
        )
    list(client.chat.completions.create(model="gpt-4o-mini", messages=user, stream=True, **session("stream")))
    client.chat.completions.create(
        model="gpt-4o-mini", messages=[{"role": "user", "content": "weather in Lima?"}], tools=TOOLS, **session("tools")
    )
    sim.faults({"kind": "status", "status": 500, "times": 1})
    with pytest.raises(openai.APIStatusError):
        client.chat.completions.create(model="gpt-4o-mini", messages=user, **session("upstream-500"))
    sim.faults({"kind": "drop_stream", "times": 1})
    long_question = [{"role": "user", "content": "tell me a long story about " + "the sea and the wind " * 10}]
    with pytest.raises(openai.APIError):
        list(
            client.chat.completions.create(
                model="gpt-4o-mini", messages=long_question, stream=True, **session("dropped")
            )
        )
    return sessions


def _check_store(engine: Engine, sessions: list[str]) -> None:
    rows = list_requests(engine, limit=100)
    assert sorted(r.session_id for r in rows) == sorted(sessions)
    by_session = {r.session_id: r for r in rows}
    assert all(by_session[s].status == 200 for s in ("plain-0", "plain-1", "plain-2", "stream", "tools"))
    assert by_session["upstream-500"].status == 502 and by_session["upstream-500"].error
    assert all(r.caller == hashlib.sha256(KEY.encode()).hexdigest()[:12] for r in rows)
    dropped = get_request(engine, by_session["dropped"].request_id)
    assert dropped is not None and dropped.summary.status >= 500 and dropped.summary.stream
    assert dropped.response_text, "the partial text streamed before the drop is kept"
    streamed = get_request(engine, by_session["stream"].request_id)
    assert streamed is not None and streamed.finish_reason == "stop" and streamed.response_text
    assert streamed.summary.prompt_tokens > 0, "usage is recorded for streams the client did not ask usage for"
    plain = get_request(engine, by_session["plain-0"].request_id)
    assert plain is not None and "[REDACTED]" in plain.original["messages"][0]["content"]
    assert plain.summary.total_ms >= plain.summary.overhead_ms > 0


def test_every_request_is_recorded_on_sqlite(sim: SimHandle, tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'store.db'}"
    with run_gateway(tmp_path, _config(sim, url)) as gw:
        sessions = _traffic(gw.base_url, sim)
        ready = httpx.get(gw.url + "/readyz").json()
        assert ready["store"] is True and ready["store_status"]["dropped"] == 0
        metrics = httpx.get(gw.url + "/metrics").text
        assert "ventana_store_queue_depth" in metrics and "ventana_store_spooled_total" in metrics
    # the gateway has exited: its shutdown flushed the queue
    engine = make_engine(url)
    try:
        _check_store(engine, sessions)
    finally:
        engine.dispose()
    files = [p for p in tmp_path.rglob("*") if p.is_file()]
    assert any(p.name == "store.db" for p in files)
    for path in files:
        data = path.read_bytes()
        assert KEY.encode() not in data, f"the API key was written to {path}"
        if path.name.startswith("store.db"):
            assert b"ana@example.com" not in data, f"a redacted address reached {path}"


@pytest.mark.postgres
def test_every_request_is_recorded_on_postgres(sim: SimHandle, tmp_path: Path) -> None:
    with postgres_database() as url:
        upgrade(url)
        with run_gateway(tmp_path, _config(sim, url)) as gw:
            sessions = _traffic(gw.base_url, sim)
        engine = make_engine(url)
        try:
            _check_store(engine, sessions)
        finally:
            engine.dispose()
