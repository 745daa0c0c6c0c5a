"""What api/chat.py puts on the record: the budget report and the model's calibration.

The gateway app runs in-process (so the test can read its MemoryRecorder), the provider
simulator is a real process over real HTTP, and the client is the official SDK.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx
import openai
import pytest

from gateway.api.app import create_app
from gateway.api.deps import Gateway
from gateway.api.stream_relay import StreamRelay
from gateway.config import parse_settings
from gateway.store.record import Answer, Forwarded, MemoryRecorder, RequestRecord
from gateway.upstream import http1
from tests.assembly.tool_fixtures import catalogue
from tests.procs import SimHandle, sim_models


@asynccontextmanager
async def _served(
    sim: SimHandle, recorder: MemoryRecorder, gateway: list[Gateway] | None = None, policy: dict[str, Any] | None = None
) -> AsyncIterator[openai.AsyncOpenAI]:
    """The SDK against the gateway app in this process, recording to ``recorder``; the upstream closed after
    (which lets the last request's bookkeeping, a loop turn after its answer, run). ``gateway`` receives the
    app's ``Gateway``, for a test to watch its parts."""
    config: dict[str, Any] = {"models": sim_models(sim.base_url), **({"policy": policy} if policy else {})}
    app = create_app(parse_settings(config), recorder=recorder)
    if gateway is not None:
        gateway.append(app.state.gateway)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://gateway") as http:
        yield openai.AsyncOpenAI(base_url="http://gateway/v1", api_key="sk-x", http_client=http)
    await app.state.gateway.upstream.close()


class _Sessions:
    """The gateway's session store, noting each save in ``events`` (or failing it, with ``fail``)."""

    def __init__(self, inner: Any, events: list[str], *, fail: bool = False, slow_s: float = 0.0) -> None:
        self._inner = inner
        self._events = events
        self._fail = fail
        self._slow_s = slow_s

    async def save(self, state: Any, base: Any = None) -> None:
        self._events.append("session saved")
        if self._fail:
            raise RuntimeError("the session store is down")
        if self._slow_s:  # a store across the network
            await asyncio.sleep(self._slow_s)
        await self._inner.save(state, base)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


async def test_the_turns_bookkeeping_runs_once_the_request_is_written_upstream(
    sim: SimHandle, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The prefix report, the session's save and the edges' ``after`` are not needed to forward: they run in
    the provider's wait, and are done before the client has its answer (the next turn sees the state)."""
    events: list[str] = []
    begin = http1._Connection.begin

    def begun(conn: http1._Connection) -> None:  # right before the request's bytes are written
        events.append("written upstream")
        begin(conn)

    monkeypatch.setattr(http1._Connection, "begin", begun)
    gateway: list[Gateway] = []
    recorder = MemoryRecorder()
    async with _served(sim, recorder, gateway) as client:
        gw = gateway[0]
        gw.sessions = _Sessions(gw.sessions, events)  # type: ignore[assignment]
        messages = [{"role": "user", "content": "hi"}]
        await client.chat.completions.create(model="gpt-4o-mini", messages=messages)
        events.append("answered")
        async for _ in await client.chat.completions.create(model="gpt-4o-mini", messages=messages, stream=True):
            pass
        events.append("answered")
    turns = "|".join(events).split("|answered")[:-1]
    assert len(turns) == 2, events
    for turn in turns:  # the upstream request begun (connecting, or writing on a kept connection), then saved
        steps = turn.strip("|").split("|")
        assert "session saved" in steps and steps.index("written upstream") < steps.index("session saved"), events
    assert [r.turn for r in recorder.records] == [1, 2], "the second turn saw the first one's saved state"


async def test_bookkeeping_that_fails_after_the_forward_costs_neither_the_answer_nor_the_record(
    sim: SimHandle, caplog: pytest.LogCaptureFixture
) -> None:
    """Once the provider has the request it bills its answer: a session store failing then is logged, and the
    client still gets the answer and the request its record."""
    gateway: list[Gateway] = []
    recorder = MemoryRecorder()
    events: list[str] = []
    async with _served(sim, recorder, gateway) as client:
        gw = gateway[0]
        gw.sessions = _Sessions(gw.sessions, events, fail=True)  # type: ignore[assignment]
        reply = await client.chat.completions.create(model="gpt-4o-mini", messages=[{"role": "user", "content": "hi"}])
    assert reply.choices[0].message.content
    assert events == ["session saved"]
    (record,) = recorder.records
    assert record.status == 200 and record.response_text == reply.choices[0].message.content
    assert "bookkeeping of request" in caplog.text and "the session store is down" in caplog.text


async def test_every_record_carries_the_budget_and_the_calibration_learns(sim: SimHandle) -> None:
    recorder = MemoryRecorder()
    async with _served(sim, recorder) as client:
        for day in ("2026-11-29", "2026-11-30", "2026-12-01"):  # a date that changes moves to the reminder
            messages = [{"role": "system", "content": f"Today is {day}.\nBe brief."}, {"role": "user", "content": "hi"}]
            await client.chat.completions.create(model="gpt-4o-mini", messages=messages, max_tokens=256)
    budget = recorder.records[-1].budget
    assert budget is not None
    assert budget["reserve"] == 256
    assert budget["components"]["reminder"]["tokens"] > 0
    assert budget["prompt_tokens"] == recorder.records[-1].tokens_assembled == recorder.records[-1].usage.prompt_tokens
    assert budget["calibration"]["samples"] == 2  # the third request's own answer is observed after its budget
    assert budget["calibration"]["ratio"] == 1.0


class _Watching(MemoryRecorder):
    """A recorder that notes when it is asked to look ahead, and when it journals."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: list[tuple[str, object]] = []

    def look_ahead(self, sent: Forwarded) -> None:
        self.calls.append(("look_ahead", sent))

    def journal(self, record: RequestRecord) -> None:
        self.calls.append(("journal", record.sent))
        super().journal(record)


async def test_the_recorder_looks_ahead_at_a_request_while_the_provider_answers_it(sim: SimHandle) -> None:
    """Plain and streamed: the look-ahead comes before the journal, for the same forwarded request."""
    recorder = _Watching()
    async with _served(sim, recorder) as client:
        messages = [{"role": "user", "content": "hi"}]
        await client.chat.completions.create(model="gpt-4o-mini", messages=messages)
        async for _ in await client.chat.completions.create(model="gpt-4o-mini", messages=messages, stream=True):
            pass
    kinds = [kind for kind, _ in recorder.calls]
    assert kinds == ["look_ahead", "journal", "look_ahead", "journal"]
    assert recorder.calls[0][1] is recorder.calls[1][1] and recorder.calls[2][1] is recorder.calls[3][1]


async def test_a_streams_answer_is_made_once_for_the_journal_and_once_for_the_record(
    sim: SimHandle, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A stream's end reaches its settling three times (the generator's ``finally``, the response's, the owner's):
    the answer, joined from every chunk, is made for the first only, and the record still carries its text."""
    made = []
    answer_of = StreamRelay.answer

    def counted(relay: StreamRelay) -> Answer:
        made.append(relay)
        return answer_of(relay)

    monkeypatch.setattr(StreamRelay, "answer", counted)
    recorder = MemoryRecorder()
    async with _served(sim, recorder) as client:
        messages = [{"role": "user", "content": "say something long"}]
        chunks = [
            c async for c in await client.chat.completions.create(model="gpt-4o-mini", messages=messages, stream=True)
        ]
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert len(made) == 2, "one for the journal before [DONE], one for the record"
    (record,) = recorder.records
    assert record.response_text == text and text


async def test_a_search_the_model_makes_in_its_turn_is_kept_however_slow_the_turns_own_save(sim: SimHandle) -> None:
    """``find_tools`` grows the session's tool set while the provider works on the turn; the turn's own save of
    the session, in a slow store, must not land after that and undo it (a request offered the gateway's own
    tools books before it forwards)."""
    gateway: list[Gateway] = []
    policy = {"tools": {"mode": "prune", "max_tools": 3}}
    need, then = "Remind me about the meeting with Laura", "What's the weather forecast in Paris tomorrow?"
    async with _served(sim, MemoryRecorder(), gateway, policy) as client:
        gw = gateway[0]
        gw.sessions = _Sessions(gw.sessions, [], slow_s=0.05)  # type: ignore[assignment]
        sim.reset()
        first = [{"role": "user", "content": need}]
        await client.chat.completions.create(
            model="gpt-4o-mini",
            messages=first,
            tools=catalogue(),
            tool_choice="required",  # type: ignore[arg-type]
        )
        searched, grown = sim.received()
        assert "find_tools" in _offered(searched) and len(_offered(grown)) == len(catalogue()), "the model searched"
        sim.reset()
        later = [*first, {"role": "assistant", "content": "Noted."}, {"role": "user", "content": then}]
        await client.chat.completions.create(model="gpt-4o-mini", messages=later, tools=catalogue())  # type: ignore[arg-type]
        (sent,) = sim.received()
    assert len(_offered(sent)) >= len(catalogue()), "the session kept what its search grew"


def _offered(body: dict[str, Any]) -> list[str]:
    return [t["function"]["name"] for t in body.get("tools") or ()]
