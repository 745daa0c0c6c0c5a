"""The simulator's ``POST /v1/messages``: Anthropic's Messages API over the chat simulation.

The request is translated to a chat body (``formats.anthropic_messages``), answered by the
same deterministic simulation as ``/v1/chat/completions``, and translated back, so the two
routes never disagree about an answer. Caching always follows Anthropic's rules
(``cache_models.AnthropicCacheModel``: explicit breakpoints, at most 4, the 20-block
lookback, minimum lengths, writes reported apart), whatever the model is called: this is
the endpoint litellm reaches for a model configured as ``anthropic/...``.
"""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import AsyncIterator, Mapping
from typing import TYPE_CHECKING, Any

import orjson
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse

from gateway.errors import RequestError
from gateway.formats.anthropic_messages import chat_body, error_body, message_from_chat
from gateway.formats.anthropic_stream import MessagesStream, chat_payloads
from gateway.providersim.cache_models import AnthropicCacheModel, anthropic_minimum, prompt_blocks
from gateway.tokens import counter_for, encoding_for_model

if TYPE_CHECKING:
    from gateway.providersim.app import Simulator

_JSON = "application/json"


def _error(status: int, message: str) -> Response:
    return Response(orjson.dumps(error_body(status, message)), status_code=status, media_type=_JSON)


def anthropic_usage(sim: Simulator, body: Mapping[str, Any]) -> dict[str, Any]:
    """Chat usage with Anthropic's cache fields, accounted by the Anthropic cache model of ``body``'s model."""
    model = str(body.get("model", ""))
    counter = counter_for(encoding_for_model(model))
    prompt = prompt_blocks(counter, body.get("messages") or [], body.get("tools"))
    read = write = 0
    if sim.cache_enabled:
        key = "messages:" + model  # apart from the chat route's cache of the same model
        cache = sim.caches.get(key)
        if cache is None:
            cache = sim.caches[key] = AnthropicCacheModel(minimum=anthropic_minimum(model))
        result = cache.account(prompt)
        read, write = result.read, result.write
    prompt_tokens = sum(len(b) for b in prompt.blocks)
    return {
        "prompt_tokens": prompt_tokens,
        "completion_tokens": 0,
        "total_tokens": prompt_tokens,
        "prompt_tokens_details": {"cached_tokens": read},
        "cache_read_input_tokens": read,
        "cache_creation_input_tokens": write,
    }


async def create_message(sim: Simulator, request: Request) -> Response:
    from gateway.providersim.app import _answer_text, _arguments, _forced_tool

    raw = await request.body()
    sim.requests += 1
    try:
        body = chat_body(orjson.loads(raw), "anthropic", server_tools=True)
    except orjson.JSONDecodeError:
        return _error(400, "body is not valid JSON")
    except RequestError as exc:
        return _error(400, exc.message)
    sim._record(raw)
    fault = sim.faults.take()
    if fault is not None and fault.before_answer:
        return await fault.respond(request.headers.get("x-api-key", ""))
    if sim.latency_s:
        await asyncio.sleep(sim.latency_s)
    usage = anthropic_usage(sim, body)
    tool = _forced_tool(body)
    text = None if tool else _answer_text(body["messages"], body["max_tokens"])
    usage["completion_tokens"] = max(1, len((text or "").split()))
    usage["total_tokens"] = usage["prompt_tokens"] + usage["completion_tokens"]
    completion_id = "sim" + hashlib.sha256(raw).hexdigest()[:16]
    model = str(body["model"])
    if body.get("stream"):
        chat = sim._stream(body, completion_id, text, tool, usage, fault)
        return StreamingResponse(_events(chat, model), media_type="text/event-stream")
    message: dict[str, Any] = {"role": "assistant", "content": text}
    if tool:
        call = {"name": tool.get("name"), "arguments": _arguments(tool)}
        message["tool_calls"] = [{"id": "toolu_" + completion_id[-12:], "type": "function", "function": call}]
    choice = {"index": 0, "message": message, "finish_reason": "tool_calls" if tool else "stop"}
    answer = {"id": completion_id, "choices": [choice], "usage": usage}
    return Response(orjson.dumps(message_from_chat(answer, model)), media_type=_JSON)


async def _events(chat: AsyncIterator[bytes], model: str) -> AsyncIterator[bytes]:
    stream = MessagesStream(model)
    buffer = bytearray()
    async for data in chat:
        for payload in chat_payloads(buffer, data):
            if payload != b"[DONE]":
                for event in stream.feed(orjson.loads(payload)):
                    yield event
    for event in stream.finish():
        yield event
