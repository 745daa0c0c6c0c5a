"""Build RequestRecords the way the API layer does, from real conversations (tests/data)."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from typing import Any

import orjson

from gateway.store.engine import make_engine
from gateway.store.queries import StoredRequest, get_request
from gateway.store.record import RequestRecord
from gateway.upstream.usage import Usage
from tests.shared_data import data_path, need

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": "Current weather for a city",
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
        },
    }
]


def make_record(messages: list[dict[str, Any]], **changes: Any) -> RequestRecord:
    body = {"model": "gpt-4o-mini", "messages": messages, "temperature": 0.2}
    values: dict[str, Any] = {
        "request_id": "req-" + uuid.uuid4().hex[:20],
        "session_id": "s-test",
        "created_at": time.time(),
        "model": "gpt-4o-mini",
        "provider": "openai",
        "caller": "c0ffee123456",
        "original": body,
        "assembled": body,
        "response_text": "ok",
        "finish_reason": "stop",
        "usage": Usage(prompt_tokens=10, completion_tokens=2, cached_tokens=4, cache_write_tokens=1),
    }
    values.update(changes)
    return RequestRecord.of(**values)


def user_texts() -> list[str]:
    """The user messages of BFCL's long memory conversations (real text written outside the team)."""
    texts = []
    for line in need(data_path("bfcl_memory.jsonl")).read_bytes().splitlines():
        for message in orjson.loads(line)["messages"]:
            if message["role"] == "user" and isinstance(message.get("content"), str):
                texts.append(message["content"])
    return texts


def agent_session(turns: int, *, per_turn: int = 1, session_id: str = "s-agent") -> Iterator[RequestRecord]:
    """An agent session as a client sends it: every turn resends the whole history plus new turns.

    Each turn adds ``per_turn`` real user messages (joined) and the assistant's answer,
    which the next turn resends exactly as the store recorded it.
    """
    texts = user_texts()
    messages: list[dict[str, Any]] = [{"role": "system", "content": "You are a careful assistant. Remember facts."}]
    start = time.time() - turns
    for turn in range(turns):
        chunk = texts[(turn * per_turn) % len(texts) : (turn * per_turn) % len(texts) + per_turn]
        messages = [*messages, {"role": "user", "content": f"[turn {turn}]\n" + "\n".join(chunk)}]
        answer = f"Noted (turn {turn}): " + chunk[-1][:600]
        body = {"model": "gpt-4o-mini", "messages": messages, "tools": TOOLS}
        yield make_record(
            messages,
            session_id=session_id,
            created_at=start + turn,
            original=body,
            assembled=body,
            response_text=answer,
            turn=turn + 1,
        )
        messages = [*messages, {"role": "assistant", "content": answer}]


def recorded(database: str, request_id: str) -> StoredRequest:
    """The stored record of a request (written after the answer, so wait for it)."""
    engine = make_engine(database)
    try:
        for _ in range(100):
            found = get_request(engine, request_id)
            if found is not None:
                return found
            time.sleep(0.1)
    finally:
        engine.dispose()
    raise AssertionError(f"request {request_id} was never recorded")
