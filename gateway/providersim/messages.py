"""The simulator's ``POST /v1/messages``: Anthropic's Messages API over the chat simulation.

The request is translated to a chat body (``formats.anthropic_messages``), answered by the
same deterministic simulation as ``/v1/chat/completions``, and translated back, so the two
routes never disagree about an answer. Caching always follows Anthropic's rules
(``cache_models.AnthropicCacheModel``: explicit breakpoints, at most 4, the 20-block
lookback, minimum lengths, writes reported apart), whatever the model is called: this is
the endpoint litellm reaches for a model configured as ``anthropic/...``. The blocks are
Anthropic's content blocks (``content_blocks``), not whole messages as on the chat route.
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
from gateway.formats.anthropic_messages import chat_body, error_body, message_from_chat, without_origins
from gateway.formats.anthropic_stream import MessagesStream, chat_payloads
from gateway.providersim.cache_models import (
    _IMAGE_ID,
    _OVERHEAD_ID,
    ANTHROPIC_MAX_BREAKPOINTS,
    AnthropicCacheModel,
    PromptBlocks,
    anthropic_minimum,
)
from gateway.providersim.completion import complete
from gateway.tokens import (
    IMAGE_TOKENS,
    MESSAGE_OVERHEAD,
    REPLY_PRIMING,
    TOOLS_OVERHEAD,
    TokenCounter,
    counter_for,
    encoding_for_model,
    render_tool,
)

if TYPE_CHECKING:
    from gateway.providersim.app import Simulator

_JSON = "application/json"


def _error(status: int, message: str) -> Response:
    return Response(orjson.dumps(error_body(status, message)), status_code=status, media_type=_JSON)


def content_blocks(counter: TokenCounter, request: Mapping[str, Any], chat: Mapping[str, Any]) -> PromptBlocks:
    """The prompt as Anthropic caches it: one block per tool, system block and message content block.

    Anthropic's lookback counts content blocks ("about 20 blocks before your breakpoint"), not
    messages, so a turn of 25 parallel tool results can put the last breakpoint out of reach.
    Tools are rendered from their chat form (``chat``), as the chat route counts them.
    """
    blocks: list[tuple[int, ...]] = []
    marks: list[int] = []

    def add(ids: list[int], marked: bool) -> None:
        blocks.append(tuple(ids))
        if marked:
            marks.append(len(blocks) - 1)

    tools = chat.get("tools") or []
    if tools:
        add([_OVERHEAD_ID] * TOOLS_OVERHEAD, False)
    for tool in tools:
        add(counter.encode(render_tool(tool)), bool(tool.get("cache_control")))
    system = request.get("system")
    turns = [{"role": "system", "content": system}] if system else []
    for turn in (*turns, *request.get("messages", ())):
        content = turn.get("content")
        items: list[Any] = [{"type": "text", "text": content}] if isinstance(content, str) else list(content or [])
        for i, block in enumerate(items):
            head = [_OVERHEAD_ID] * MESSAGE_OVERHEAD + counter.encode(str(turn.get("role"))) if i == 0 else []
            add(head + _block_ids(counter, block), _marked(block))
    add([_OVERHEAD_ID] * REPLY_PRIMING, False)
    return PromptBlocks(tuple(blocks), tuple(marks[-ANTHROPIC_MAX_BREAKPOINTS:]))


def _marked(block: Any) -> bool:
    if not isinstance(block, Mapping):
        return False
    found = block.get("content")
    inner: list[Any] = found if isinstance(found, list) else []
    return bool(block.get("cache_control")) or any(isinstance(b, Mapping) and b.get("cache_control") for b in inner)


def _block_ids(counter: TokenCounter, block: Any) -> list[int]:
    if not isinstance(block, Mapping):
        return []
    kind = block.get("type")
    found = block.get("source")
    source: Mapping[str, Any] = found if isinstance(found, Mapping) else {}
    if kind == "image" or (kind == "document" and source.get("type") != "text"):
        return [_IMAGE_ID] * IMAGE_TOKENS  # billed as a fixed size, as the chat route counts images
    if kind == "tool_use":
        return counter.encode(str(block.get("name", "")) + orjson.dumps(block.get("input") or {}).decode())
    if kind == "tool_result":
        inner = block.get("content")
        items = inner if isinstance(inner, list) else [{"type": "text", "text": inner or ""}]
        return counter.encode(str(block.get("tool_use_id", ""))) + [i for b in items for i in _block_ids(counter, b)]
    if kind == "document":
        return counter.encode(str(source.get("data", "")))
    text = block.get("text") if kind == "text" else block.get("thinking") or block.get("data") or ""
    return counter.encode(str(text))


def anthropic_usage(sim: Simulator, request: Mapping[str, Any], chat: Mapping[str, Any]) -> dict[str, Any]:
    """Chat usage with Anthropic's cache fields, accounted by the Anthropic cache model of the request's model."""
    model = str(chat.get("model", ""))
    counter = counter_for(encoding_for_model(model))
    prompt = content_blocks(counter, request, chat)
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
    raw = await request.body()
    sim.requests += 1
    try:
        request_body = orjson.loads(raw)
        body = without_origins(chat_body(request_body, "anthropic", native=True))
    except orjson.JSONDecodeError:
        return _error(400, "body is not valid JSON")
    except RequestError as exc:
        return _error(400, exc.message)
    sim._record(raw)
    sim.messages_headers.append({k: v for k, v in request.headers.items() if k.startswith("anthropic-")})
    fault = sim.faults.take()
    if fault is not None and fault.before_answer:
        return await fault.respond(request.headers.get("x-api-key", ""))
    if sim.latency_s:
        await asyncio.sleep(sim.latency_s)
    usage = anthropic_usage(sim, request_body, body)
    completion_id = "sim" + hashlib.sha256(raw).hexdigest()[:16]
    answer = _provider_ids(complete(body, completion_id=completion_id, usage=usage, message=sim.replayed(body)))
    model = str(body["model"])
    if body.get("stream"):
        return StreamingResponse(_events(sim._stream(body, answer, fault), model), media_type="text/event-stream")
    return Response(orjson.dumps(message_from_chat(answer, model)), media_type=_JSON)


def _provider_ids(answer: dict[str, Any]) -> dict[str, Any]:
    """Tool call ids as Anthropic writes them (``toolu_...``; the chat simulation writes OpenAI's ``call_...``)."""
    for choice in answer.get("choices") or ():
        for call in (choice.get("message") or {}).get("tool_calls") or ():
            if isinstance(call.get("id"), str):
                call["id"] = "toolu_" + call["id"].removeprefix("call_")
    return answer


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
