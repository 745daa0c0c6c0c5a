"""The floor proxy of ``benchmarks.overhead --floor`` forwards what it gets and relays what comes back, over
real HTTP; the report reads Ventana's own time as its added time less the floor's."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from benchmarks.floor_proxy import run_floor
from benchmarks.overhead import report
from benchmarks.profiles import Profile
from tests.procs import run_simulator

CHAT = {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "say something"}], "max_tokens": 8}


def test_the_floor_proxy_forwards_a_completion_and_relays_a_stream_as_the_provider_sent_them(tmp_path: Path) -> None:
    with run_simulator(tmp_path, record=False, cache=False) as sim, run_floor(tmp_path, sim.url) as floor:
        stats_url = sim.url + "/sim/stats"
        before = httpx.get(stats_url).json()["requests"]
        direct = httpx.post(sim.base_url + "/chat/completions", json=CHAT).json()
        via = httpx.post(floor + "/chat/completions", json=CHAT)
        with httpx.stream("POST", floor + "/chat/completions", json={**CHAT, "stream": True}) as streamed:
            kind = streamed.headers["content-type"]
            events = [line for line in streamed.iter_lines() if line.startswith("data: ")]
        after = httpx.get(stats_url).json()["requests"]
    assert via.status_code == 200
    assert via.json()["choices"][0]["message"] == direct["choices"][0]["message"]
    assert kind.startswith("text/event-stream")
    assert len(events) > 2 and events[-1] == "data: [DONE]"
    assert after - before == 3, "each request reached the provider once"


TINY = [Profile("tiny", b"{}", stream=False, messages=1, tokens=13)]
#: The tiny profile's figures as ``benchmarks.overhead`` measures them without LiteLLM or the floor.
VENTANA_ONLY = {
    "ventana.end.added_p50": 1.25,
    "ventana.end.added_p99": 2.0,
    "direct.rps": 9000.0,
    "ventana.rps": 1500.0,
}


def test_the_report_gives_the_floor_and_ventanas_own_time_beside_it() -> None:
    litellm = {"litellm.end.added_p50": 13.0, "litellm.end.added_p99": 20.0, "litellm.rps": 90.0}
    results = {"tiny": {**VENTANA_ONLY, **litellm, "ventana_over_litellm": 16.7, "floor.end.added_p50": 0.25}}
    table = report(results, TINY)
    header, _, row = table.splitlines()
    assert "floor added p50 ms (Ventana's own)" in header
    assert "| +0.25 (+1.00) |" in row
    assert header.count("|") == row.count("|")
    del results["tiny"]["floor.end.added_p50"]
    assert "floor" not in report(results, TINY)


def test_a_slow_neighbour_waits_or_computes_before_it_forwards(tmp_path: Path) -> None:
    """``--neighbour sleep=MS`` / ``burn=MS``: the floor proxy takes at least that long, and still answers."""
    import time

    with run_simulator(tmp_path, record=False, cache=False) as sim:
        for kind in ("sleep_ms", "burn_ms"):
            with run_floor(tmp_path, sim.url, **{kind: 60.0}) as slow:
                httpx.post(slow + "/chat/completions", json=CHAT).raise_for_status()  # the pool's connection made
                started = time.perf_counter()
                answer = httpx.post(slow + "/chat/completions", json=CHAT)
                took = time.perf_counter() - started
            assert answer.status_code == 200 and answer.json()["choices"], kind
            assert took >= 0.06, f"{kind}: answered after {took * 1000:.1f} ms"


def test_the_report_names_the_neighbour_where_litellm_would_be() -> None:
    row = report({"tiny": {**VENTANA_ONLY, "neighbour.end.added_p50": 13.6}}, TINY).splitlines()[2]
    assert "| neighbour +13.60 |" in row


async def test_the_floor_tries_a_failed_connection_again_as_the_gateway_does() -> None:
    """A kept-alive connection the provider closed as it was taken failed a floor request (12 in one c=32
    stream cell); the gateway's client tries again, so the floor does too, and gives up as it does."""
    from typing import Any

    from benchmarks.floor_proxy import RETRIES, FloorProxy

    class Flaky:
        def __init__(self, failures: int) -> None:
            self.failures = failures
            self.calls = 0

        async def post(self, url: str, body: bytes, headers: dict[str, str]) -> Any:
            self.calls += 1
            if self.calls <= self.failures:
                raise ConnectionResetError("closed as it was taken")
            return "answer"

    floor = FloorProxy("http://127.0.0.1:9")
    floor._pool = once = Flaky(1)  # type: ignore[assignment]
    assert await floor._post("http://x/v1/chat/completions", b"{}", {}) == "answer" and once.calls == 2
    floor._pool = always = Flaky(RETRIES + 5)  # type: ignore[assignment]
    with pytest.raises(ConnectionResetError):  # a connection failing every time is not tried for ever
        await floor._post("http://x/v1/chat/completions", b"{}", {})
    assert always.calls == RETRIES + 1
