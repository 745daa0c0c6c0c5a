"""What api/chat.py puts on the record: the budget report and the model's calibration.

The gateway app runs in-process (so the test can read its MemoryRecorder), the provider
simulator is a real process over real HTTP, and the client is the official SDK.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import httpx
import openai
import pytest

from gateway.api.app import create_app
from gateway.api.stream_relay import StreamRelay
from gateway.config import parse_settings
from gateway.store.record import Answer, Forwarded, MemoryRecorder, RequestRecord
from tests.procs import SimHandle, sim_models


@asynccontextmanager
async def _served(sim: SimHandle, recorder: MemoryRecorder) -> AsyncIterator[openai.AsyncOpenAI]:
    """The SDK against the gateway app in this process, recording to ``recorder``; the upstream closed after
    (which lets the last request's bookkeeping, a loop turn after its answer, run)."""
    app = create_app(parse_settings({"models": sim_models(sim.base_url)}), recorder=recorder)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://gateway") as http:
        yield openai.AsyncOpenAI(base_url="http://gateway/v1", api_key="sk-x", http_client=http)
    await app.state.gateway.upstream.close()


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
