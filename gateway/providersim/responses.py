"""The simulator's ``POST /v1/responses``: the chat simulation, translated both ways.

So ``ventana serve`` with no key answers Responses clients out of the box, and a test can
talk Responses to the simulator directly. The request becomes a chat body (the same
translation the gateway uses), the simulator's own chat handler answers it (faults,
recording, cache accounting and latency included), and the answer or its chunk stream is
translated back. The simulator keeps no responses: ``previous_response_id`` is refused.
``--record`` keeps the Responses body as received (not its chat translation), so a test sees
exactly what a gateway forwarding Responses natively sent.
"""

from __future__ import annotations

import os
import time
from collections.abc import AsyncIterable, AsyncIterator
from typing import TYPE_CHECKING

import orjson
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.types import Message

from gateway.errors import RequestError
from gateway.formats.responses import chat_body, check_request, input_items
from gateway.formats.responses_answer import response_from_chat, response_object
from gateway.formats.responses_stream import ResponseEvents

if TYPE_CHECKING:
    from gateway.providersim.app import Simulator

_JSON = "application/json"


def _error(exc: RequestError) -> Response:
    return Response(orjson.dumps(exc.body()), status_code=exc.status_code, media_type=_JSON)


def _with_body(request: Request, raw: bytes) -> Request:
    """``request`` with ``raw`` as its body: the chat handler reads it like any request."""
    sent = False

    async def receive() -> Message:
        nonlocal sent
        if sent:
            return {"type": "http.disconnect"}
        sent = True
        return {"type": "http.request", "body": raw, "more_body": False}

    return Request(request.scope, receive)


async def responses(sim: Simulator, request: Request) -> Response:
    raw = await request.body()
    try:
        body = check_request(orjson.loads(raw))
        if body.get("previous_response_id"):
            raise RequestError("the simulator keeps no responses; send the whole input", param="previous_response_id")
        response_id = "resp_sim" + os.urandom(12).hex()
        chat = chat_body(body, input_items(body, response_id))
    except orjson.JSONDecodeError:
        return _error(RequestError("body is not valid JSON", code="invalid_json"))
    except RequestError as exc:
        return _error(exc)
    sim._record(raw)  # the Responses body as received: what a gateway forwarding natively sent
    answer = await sim.chat(_with_body(request, orjson.dumps(chat)), record=False)
    base = response_object(body, response_id, int(time.time()))
    if isinstance(answer, StreamingResponse):
        return StreamingResponse(_events(answer.body_iterator, base), media_type="text/event-stream")
    if answer.status_code != 200:
        return answer
    return Response(
        orjson.dumps(response_from_chat(orjson.loads(bytes(answer.body)), base, int(time.time()))), media_type=_JSON
    )


async def _events(chunks: AsyncIterable[str | bytes | memoryview], base: dict[str, object]) -> AsyncIterator[bytes]:
    events = ResponseEvents(base)
    for event in events.start():
        yield _sse(event)
    async for piece in chunks:
        block = piece.encode() if isinstance(piece, str) else bytes(piece)
        payload = block.removeprefix(b"data: ").strip()
        if payload and payload != b"[DONE]":
            for event in events.chunk(orjson.loads(payload)):
                yield _sse(event)
    closing, _ = events.complete(int(time.time()))
    for event in closing:
        yield _sse(event)


def _sse(event: dict[str, object]) -> bytes:
    return b"event: " + str(event["type"]).encode() + b"\ndata: " + orjson.dumps(event) + b"\n\n"
