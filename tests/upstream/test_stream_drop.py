"""The pooled OpenAI-compatible upstream relays every event that arrived before a dropped stream."""

from __future__ import annotations

import httpx
import orjson

from gateway.upstream.openai_compat import _split_events
from tests.procs import GatewayHandle, SimHandle


def test_split_events_keeps_the_incomplete_line_and_stops_at_done() -> None:
    payloads, rest, done = _split_events(b'data: {"a":1}\n\n: comment\ndata: {"b":2}\r\ndata: [DONE]\n\ndata: {"c"')
    assert payloads == [b'{"a":1}', b'{"b":2}'] and done
    payloads, rest, done = _split_events(b'data: {"a":1}\n\ndata: {"b"')
    assert payloads == [b'{"a":1}'] and rest == b'data: {"b"' and not done


def test_events_before_a_drop_reach_the_client_every_time(passthrough_gateway: GatewayHandle, sim: SimHandle) -> None:
    body = {
        "model": "gpt-4o-mini",
        "messages": [{"role": "user", "content": "a long answer please now"}],
        "stream": True,
    }
    for _ in range(5):  # the drop races the data into the client's buffer; each run must keep it
        sim.faults({"kind": "drop_stream", "times": 1})
        with httpx.stream("POST", passthrough_gateway.base_url + "/chat/completions", json=body, timeout=10) as r:
            events = [e[6:] for e in b"".join(r.iter_bytes()).split(b"\n\n") if e.startswith(b"data: ")]
        assert "error" in orjson.loads(events[-1])
        text = "".join(
            c["choices"][0]["delta"].get("content") or "" for c in map(orjson.loads, events[:-1]) if c.get("choices")
        )
        assert text.startswith("Simulated answer")
