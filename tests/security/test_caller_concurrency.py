"""Finding: no per-caller concurrency cap, so one key holding slow streams took the pool from everyone.

With ``limits.max_concurrent_per_caller``, a key's requests past the cap get a 429
``concurrency_limit_exceeded`` while another key is still served; a slot is counted until
the last byte of a stream.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator

import httpx
import pytest

from gateway.api.app import create_app
from gateway.config import parse_settings
from tests.inproc import serve_in_thread
from tests.procs import SimHandle, sim_models

BODY = {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "one two three four five six"}]}


@pytest.fixture
def capped(sim: SimHandle) -> Iterator[str]:
    settings = parse_settings({"models": sim_models(sim.base_url), "limits": {"max_concurrent_per_caller": 2}})
    with serve_in_thread(create_app(settings)) as url:
        yield url


def test_a_caller_past_its_cap_is_refused_and_others_are_served(capped: str, sim: SimHandle) -> None:
    sim.faults({"kind": "slow_stream", "seconds": 0.4, "times": 2})
    opened = threading.Barrier(3)

    def slow(key: str) -> None:
        headers = {"authorization": f"Bearer {key}"}
        with httpx.stream("POST", capped + "/v1/chat/completions", json={**BODY, "stream": True}, headers=headers) as r:
            first = True
            for _ in r.iter_bytes():
                if first:
                    opened.wait(10)
                    first = False

    threads = [threading.Thread(target=slow, args=("sk-greedy",)) for _ in range(2)]
    for t in threads:
        t.start()
    opened.wait(10)  # both streams are open and slow
    refused = httpx.post(capped + "/v1/chat/completions", json=BODY, headers={"authorization": "Bearer sk-greedy"})
    other = httpx.post(capped + "/v1/chat/completions", json=BODY, headers={"authorization": "Bearer sk-polite"})
    for t in threads:
        t.join(30)
    assert refused.status_code == 429 and refused.json()["error"]["code"] == "concurrency_limit_exceeded"
    assert other.status_code == 200
    again = httpx.post(capped + "/v1/chat/completions", json=BODY, headers={"authorization": "Bearer sk-greedy"})
    assert again.status_code == 200, "the slots came back when the streams ended"
