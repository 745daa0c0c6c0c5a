"""A long body new to the gateway is read in a worker thread, with the same answers and errors.

Bodies from ``ASSEMBLE_OFF_LOOP_BYTES`` whose history the parser does not know are parsed,
checked and named off the event loop (``chat.read_new_body``). Through the OpenAI SDK: the
answer, the session it is named into and the next turn's reuse of its parsed history match
what the loop path gives; bad JSON, a bad message and an unknown model get the same 4xx.
"""

from __future__ import annotations

import threading
from typing import Any

import httpx
import openai
import orjson
import pytest

from benchmarks.profiles import build_profiles
from gateway.api import chat
from gateway.api.app import create_app
from gateway.api.chat import ASSEMBLE_OFF_LOOP_BYTES
from gateway.config import parse_settings
from tests.inproc import serve_in_thread
from tests.procs import SimHandle, sim_models


def _long_body() -> dict[str, Any]:
    body = orjson.loads(build_profiles(("agent105k",))[0].body)
    body["model"] = "gpt-4o-mini"
    assert len(orjson.dumps(body)) > ASSEMBLE_OFF_LOOP_BYTES
    return body


def test_a_long_first_turn_is_answered_named_and_remembered(sim: SimHandle, monkeypatch: pytest.MonkeyPatch) -> None:
    threads: list[str] = []
    original = chat.read_new_body

    def read_new_body(*args: Any) -> Any:
        threads.append(threading.current_thread().name)
        return original(*args)

    monkeypatch.setattr(chat, "read_new_body", read_new_body)
    app = create_app(parse_settings({"models": sim_models(sim.base_url)}))
    gw = app.state.gateway
    body = _long_body()
    with serve_in_thread(app) as url:
        client = openai.OpenAI(base_url=url + "/v1", api_key="sk-test", max_retries=0)
        first = client.chat.completions.with_raw_response.create(model=body["model"], messages=body["messages"])
        assert first.http_response.status_code == 200
        assert len(gw.parser) == 1, "the body read in a thread was remembered for the next turn"
        body["messages"].append({"role": "user", "content": "Now book the cheapest one."})
        second = client.chat.completions.with_raw_response.create(model=body["model"], messages=body["messages"])
        # The next turn reused it (replacing it; a new entry would make two), on the loop path,
        # and named the conversation as the thread did.
        assert len(gw.parser) == 1
        assert second.headers["x-ventana-session-id"] == first.headers["x-ventana-session-id"]
        assert second.http_response.status_code == 200
    assert len(threads) == 1 and not threads[0].startswith("uvicorn"), "only the first turn, in a worker thread"


@pytest.mark.parametrize(
    ("damage", "status", "code"),
    [
        (lambda raw: raw[:-3], 400, "invalid_json"),
        (lambda raw: raw.replace(b'"role":"tool"', b'"role":"robot"', 1), 400, "invalid_value"),
        (lambda raw: raw.replace(b'"gpt-4o-mini"', b'"no-such-model"', 1), 404, "model_not_found"),
    ],
)
def test_a_long_bad_body_gets_the_same_error_as_a_short_one(
    sim: SimHandle, damage: Any, status: int, code: str
) -> None:
    app = create_app(parse_settings({"models": sim_models(sim.base_url)}))
    long_raw = damage(orjson.dumps(_long_body()))
    short_raw = damage(orjson.dumps({**_long_body(), "messages": _long_body()["messages"][:4]}))
    headers = {"content-type": "application/json"}
    with serve_in_thread(app) as url:
        long_r = httpx.post(url + "/v1/chat/completions", content=long_raw, headers=headers, timeout=30)
        short_r = httpx.post(url + "/v1/chat/completions", content=short_raw, headers=headers, timeout=30)
    assert len(long_raw) > ASSEMBLE_OFF_LOOP_BYTES > len(short_raw)
    assert (long_r.status_code, long_r.json()["error"]["code"]) == (status, code)
    assert (short_r.status_code, short_r.json()["error"]["code"]) == (status, code)
