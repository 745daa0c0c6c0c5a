"""Pass-through mode: tenants may share one provider key, so it cannot be what scopes their state.

With ``auth.passthrough`` and auth on, the bearer is the client's provider key and the gateway key
travels in ``X-Ventana-Key``. Two gateway keys sending the same provider key and the same
``X-Session-Id`` must be two callers with two sessions, not one.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Iterator
from pathlib import Path

import openai
import pytest

from gateway.api.auth import hash_key
from tests.procs import GatewayHandle, SimHandle, run_gateway, sim_models

KEY_A, KEY_B, PROVIDER_KEY = "vk-pass-a-0123456789", "vk-pass-b-0123456789", "sk-shared-provider-key"


@pytest.fixture(scope="module")
def gw(sim: SimHandle, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[GatewayHandle, Path]]:
    auth = {"enabled": True, "passthrough": True, "keys": [hash_key(KEY_A), hash_key(KEY_B)]}
    tmp = tmp_path_factory.mktemp("gw-passthrough-callers")
    with run_gateway(tmp, {"models": sim_models(sim.base_url), "auth": auth}) as handle:
        yield handle, tmp / "ventana.db"


def _rows(db: Path, n: int) -> list[tuple[str, int]]:
    deadline = time.monotonic() + 30
    while True:
        with sqlite3.connect(db) as conn:
            rows = conn.execute("SELECT caller, turn FROM requests ORDER BY created_at").fetchall()
        if len(rows) >= n or time.monotonic() > deadline:
            return [(str(c), int(t)) for c, t in rows]
        time.sleep(0.2)


def test_the_gateway_key_not_the_shared_provider_key_is_the_caller(gw: tuple[GatewayHandle, Path]) -> None:
    handle, db = gw
    for key in (KEY_A, KEY_A, KEY_B):
        client = openai.OpenAI(
            base_url=handle.base_url,
            api_key=PROVIDER_KEY,
            default_headers={"x-ventana-key": key, "x-session-id": "shared"},
            max_retries=0,
        )
        client.chat.completions.create(model="gpt-4o-mini", messages=[{"role": "user", "content": "hi"}])
    a, b = hash_key(KEY_A)[:12], hash_key(KEY_B)[:12]
    assert _rows(db, 3) == [(a, 1), (a, 2), (b, 1)]
