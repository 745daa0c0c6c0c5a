"""What every fuzzed chat request must get back: an answer, or a 4xx in the OpenAI shape naming the problem."""

from __future__ import annotations

import json
from typing import Any

import httpx
import orjson

#: Error codes whose message is about the whole body, so no ``param`` is expected.
WHOLE_BODY_CODES = frozenset({"invalid_json", "request_too_large", "context_length_exceeded", "context_lint_failed"})


def post_chat(url: str, body: Any, *, raw: bytes | None = None) -> tuple[int, bytes]:
    """POST a body (JSON-encoded, or ``raw`` bytes as they are) and read the whole answer."""
    # stdlib json: it writes integers past 64 bits and lone surrogates, which orjson refuses to.
    content = raw if raw is not None else json.dumps(body).encode()
    headers = {"content-type": "application/json", "authorization": "Bearer sk-fuzz"}
    with httpx.stream("POST", url + "/chat/completions", content=content, headers=headers, timeout=30) as r:
        return r.status_code, r.read()


def check_answer(status: int, payload: bytes, *, what: str) -> dict[str, Any] | None:
    """Fail unless the answer is a success or a well-formed, specific 4xx; return the error object."""
    assert status < 500, f"{what}: {status} {payload[:500]!r}"
    if status >= 400:
        body = orjson.loads(payload)
        assert set(body) == {"error"}, f"{what}: not the OpenAI error shape: {body}"
        error = body["error"]
        assert set(error) == {"message", "type", "param", "code"}, f"{what}: {error}"
        assert isinstance(error["message"], str) and len(error["message"]) > 10, f"{what}: {error}"
        if status == 400 and error["code"] not in WHOLE_BODY_CODES:
            assert error["param"], f"{what}: a 400 that does not name the field: {error}"
        return error  # type: ignore[no-any-return]
    assert status == 200, f"{what}: {status}"
    if payload.startswith(b"data:"):
        for line in payload.split(b"\n"):
            if line.startswith(b"data: ") and line != b"data: [DONE]":
                event = orjson.loads(line[6:])
                assert "error" not in event, f"{what}: error event in a stream: {event}"
    else:
        answer = orjson.loads(payload)
        assert answer["object"] == "chat.completion", f"{what}: {answer}"
    return None
