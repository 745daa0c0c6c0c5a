"""SIGTERM in the middle of a burst of streams on all three doors: every forwarded request is recorded
exactly once, every answered one with its answer (issue 35's fault drills).

The streams are slow (the simulator sleeps between words), so the signal lands while they are being
relayed by two workers. uvicorn stops accepting, lets the streams in flight finish, then the
lifespan closes the recorder, which writes what is queued.
"""

from __future__ import annotations

import signal
import sqlite3
import threading
import time
from pathlib import Path

import httpx

from tests.procs import SimHandle, run_gateway, sim_models

PER_DOOR = 4
DOORS = {
    "chat": ("/v1/chat/completions", {"messages": [{"role": "user", "content": "burst, stream please"}]}, b"[DONE]"),
    "responses": ("/v1/responses", {"input": "burst, stream please"}, b"response.completed"),
    "messages": (
        "/v1/messages",
        {"max_tokens": 64, "messages": [{"role": "user", "content": "burst, stream please"}]},
        b"message_stop",
    ),
}


def test_sigterm_mid_burst_loses_no_record_and_records_none_twice(sim: SimHandle, tmp_path: Path) -> None:
    sim.reset()
    sim.faults({"kind": "slow_stream", "seconds": 0.05, "times": 3 * PER_DOOR})
    answered: dict[str, str] = {}  # request id -> door, for streams that reached their end
    seen: list[str] = []
    lock = threading.Lock()
    with run_gateway(tmp_path, {"models": sim_models(sim.base_url)}, workers=2) as gw:

        def stream(door: str) -> None:
            path, body, end = DOORS[door]
            payload = {"model": "gpt-4o-mini", "stream": True, **body}
            try:
                with httpx.stream("POST", gw.url + path, json=payload, timeout=60) as r:
                    request_id = r.headers.get("x-ventana-request-id")
                    content = r.read()
            except httpx.HTTPError:
                return  # cut by the stop: it may still have been forwarded, which the count below covers
            with lock:
                if request_id:
                    seen.append(request_id)
                    if r.status_code == 200 and end in content:
                        answered[request_id] = door

        threads = [threading.Thread(target=stream, args=(d,)) for d in DOORS for _ in range(PER_DOOR)]
        for t in threads:
            t.start()
        deadline = time.monotonic() + 30
        while len(sim.received()) < 3 * PER_DOOR and time.monotonic() < deadline:
            time.sleep(0.05)  # every request forwarded and streaming
        gw.proc.send_signal(signal.SIGTERM)
        for t in threads:
            t.join(60)
        gw.proc.wait(30)
    with sqlite3.connect(tmp_path / "ventana.db") as db:
        rows = [r[0] for r in db.execute("SELECT request_id FROM requests")]
    assert sorted(set(rows)) == sorted(rows), "a request recorded twice"
    assert set(answered) <= set(rows), f"answered but not recorded: {set(answered) - set(rows)}"
    assert len(rows) == len(sim.received()) == 3 * PER_DOOR, "every forwarded request recorded once, 0 lost"
    assert {answered[r] for r in answered} == set(DOORS), "each door answered through the stop"
