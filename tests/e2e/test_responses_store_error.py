"""A Responses answer the provider gave (and billed) reaches the client even when storing it fails.

Issue 35: a database error in ``store.put`` after the answer turned a paid answer into a 500,
and ended a stream with neither a ``response.completed`` nor an error event. The gateway here
runs with its responses in the database; the test drops the ``responses`` table under it, so
every put fails with a real database error while the request store keeps working.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import openai
import pytest

from tests.procs import GatewayHandle, SimHandle, run_gateway, sim_models


@pytest.fixture(scope="module")
def gw(sim: SimHandle, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[GatewayHandle, Path]]:
    tmp = tmp_path_factory.mktemp("gw-responses-store-error")
    config = {"models": sim_models(sim.base_url), "session_state": "database"}
    with run_gateway(tmp, config) as handle:
        yield handle, tmp / "ventana.db"


def _statuses(db: Path, n: int) -> list[int]:
    deadline = time.monotonic() + 30
    while True:
        with sqlite3.connect(db) as conn:
            rows = [int(r[0]) for r in conn.execute("SELECT status FROM requests ORDER BY created_at")]
        if len(rows) >= n or time.monotonic() > deadline:
            return rows
        time.sleep(0.2)


def test_a_store_error_after_the_answer_never_fails_the_client(gw: tuple[GatewayHandle, Path]) -> None:
    handle, db = gw
    client = openai.OpenAI(base_url=handle.base_url, api_key="sk-store-error", max_retries=0)
    stored = client.responses.create(model="gpt-4o-mini", input="Store me.")  # the store works: a baseline
    assert client.responses.retrieve(stored.id).id == stored.id
    with sqlite3.connect(db) as conn:
        conn.execute("DROP TABLE responses")

    raw = client.responses.with_raw_response.create(model="gpt-4o-mini", input="Answer me anyway.")
    assert raw.http_response.status_code == 200 and raw.headers["x-ventana-stored"] == "false"
    assert raw.parse().output_text
    with client.responses.stream(model="gpt-4o-mini", input="Stream me anyway.") as stream:
        events = [event.type for event in stream]
        final = stream.get_final_response()
    assert events[-1] == "response.completed" and final.status == "completed" and final.output_text
    assert _statuses(db, 3) == [200, 200, 200], "each answered request recorded once"
    assert "storing response" in handle.log()
    assert httpx.get(handle.url + "/healthz").status_code == 200
