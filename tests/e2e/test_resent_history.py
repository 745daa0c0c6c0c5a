"""A resent agent history through the official SDK: parsed once, forwarded exactly, every turn."""

from __future__ import annotations

from typing import Any

import openai
import orjson

from benchmarks.profiles import build_profiles
from gateway.api.app import create_app
from gateway.config import parse_settings
from gateway.store.record import MemoryRecorder
from tests.inproc import serve_in_thread
from tests.procs import SimHandle, sim_models


def test_each_turn_reuses_the_history_and_forwards_what_the_client_sent(sim: SimHandle) -> None:
    agent = orjson.loads(build_profiles(("agent14k",))[0].body)  # a real 37-message ToolBench run
    settings = parse_settings({"models": sim_models(sim.base_url), "policy": {"tools": {"enabled": False}}})
    recorder = MemoryRecorder()
    app = create_app(settings, recorder=recorder)
    messages: list[dict[str, Any]] = agent["messages"][:-1]
    with serve_in_thread(app) as url:
        client = openai.OpenAI(base_url=url + "/v1", api_key="unused", max_retries=0)
        gateway = app.state.gateway
        parsed: list[int] = []
        real_parse = gateway.parser.parse

        def parse(raw: bytes, caller: str) -> tuple[Any, int]:
            body, reused = real_parse(raw, caller)
            parsed.append(reused)
            return body, reused

        gateway.parser.parse = parse
        sim.reset()
        snapshots: list[list[dict[str, Any]]] = []
        for turn in range(3):
            messages.append({"role": "user", "content": f"Turn {turn}: what next? (données №{turn})"})
            snapshots.append(orjson.loads(orjson.dumps(messages)))
            reply = client.chat.completions.create(model="gpt-4o-mini", messages=messages, tools=agent["tools"])
            messages.append({"role": "assistant", "content": reply.choices[0].message.content})

    sent = [r.original for r in list(recorder.records)[-3:]]
    assert [b["messages"] for b in sent] == snapshots, "the gateway read exactly what the client sent"
    assert parsed[0] == 0 and parsed[1:] == [len(sent[0]["messages"]), len(sent[1]["messages"])], (
        "turns 2 and 3 reuse every message the client resent, byte for byte"
    )
    received = sim.received()[-3:]
    for original, forwarded in zip(sent, received, strict=True):
        assert forwarded["messages"][: len(original["messages"]) - 1] == original["messages"][:-1]
        assert any(original["messages"][-1] == m for m in forwarded["messages"])
