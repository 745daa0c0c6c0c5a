"""An OpenAI-compatible upstream that plays a transcript's real next step, for tool selection.

The driver sets the next assistant message of the transcript (``ReplayUpstream.expect``) and
sends the client request through the gateway. For every request the gateway forwards, the
upstream answers like the real agent would have, given the tools it was offered:

- the expected message when it calls no tool, or when every tool it calls is offered
  (an ``allowed_tools`` ``tool_choice`` narrows what is offered);
- else, when ``find_tools`` is offered, a call ``find_tools(query=<description of the first
  missing tool>)``: the agent asks for the tool it wants in its own words;
- else the expected message anyway, so the conversation goes on, counted as a miss: a real
  model could not have made that call.

Each forwarded request is logged with its token counts: prompt tokens (the simulator's
accounting, ``providersim.cache_models.prompt_blocks``), tool tokens, and the tokens an
OpenAI-style exact-prefix cache would have served (``providersim.cache.PrefixCache``).
It runs in a thread of the driver's process, over real HTTP on 127.0.0.1.
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import orjson
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route

from gateway.assembly.tool_scoring import tool_name
from gateway.providersim.cache import PrefixCache, prompt_token_ids
from gateway.tokens import counter_for

FIND_TOOLS = "find_tools"
COUNTER = counter_for("o200k_base")


@dataclass(slots=True)
class Forwarded:
    """One request the gateway sent upstream, and what the replay did with it."""

    kind: str  # "answer" | "search" | "miss"
    prompt_tokens: int
    cached_tokens: int
    tool_tokens: int
    offered: tuple[str, ...]
    wanted: tuple[str, ...]


@dataclass(slots=True)
class ReplayUpstream:
    expected: Mapping[str, Any] = field(default_factory=dict)
    descriptions: dict[str, str] = field(default_factory=dict)
    log: list[Forwarded] = field(default_factory=list)
    cache: PrefixCache = field(default_factory=PrefixCache)
    served: int = 0

    def expect(self, message: Mapping[str, Any], tools: Sequence[Mapping[str, Any]]) -> None:
        """The transcript's next assistant message, and the tools the client offers (for descriptions)."""
        self.expected = message
        for tool in tools:
            fn = tool.get("function") or {}
            self.descriptions[tool_name(tool)] = str(fn.get("description") or tool_name(tool))

    def answer(self, body: Mapping[str, Any]) -> dict[str, Any]:
        tools = body.get("tools") or []
        offered = _offered(tools, body.get("tool_choice"))
        wanted = tuple(
            str(c["function"]["name"]) for c in self.expected.get("tool_calls") or () if isinstance(c, Mapping)
        )
        missing = [n for n in wanted if n not in offered]
        message: dict[str, Any] = {"role": "assistant", "content": self.expected.get("content")}
        if self.expected.get("tool_calls"):
            message["tool_calls"] = self.expected["tool_calls"]
        kind = "answer"
        if missing and FIND_TOOLS in offered:
            kind = "search"
            query = self.descriptions.get(missing[0], missing[0])
            self.served += 1
            args = orjson.dumps({"query": query}).decode()
            call = {
                "id": f"call_find_{self.served}",
                "type": "function",
                "function": {"name": FIND_TOOLS, "arguments": args},
            }
            message = {"role": "assistant", "content": None, "tool_calls": [call]}
        elif missing:
            kind = "miss"
        ids = prompt_token_ids(COUNTER, body.get("messages") or [], tools or None)
        cached = self.cache.lookup_and_store(ids)
        tool_tokens = COUNTER.tools(tools) if tools else 0
        self.log.append(Forwarded(kind, len(ids), cached, tool_tokens, tuple(sorted(offered)), wanted))
        usage = {
            "prompt_tokens": len(ids),
            "completion_tokens": 20,
            "total_tokens": len(ids) + 20,
            "prompt_tokens_details": {"cached_tokens": cached},
        }
        finish = "tool_calls" if message.get("tool_calls") else "stop"
        return {
            "id": f"chatcmpl-replay-{len(self.log)}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": str(body.get("model")),
            "choices": [{"index": 0, "message": message, "finish_reason": finish}],
            "usage": usage,
        }

    def app(self) -> Starlette:
        async def completions(request: Request) -> Response:
            body = orjson.loads(await request.body())
            data = self.answer(body)
            if not body.get("stream"):
                return Response(orjson.dumps(data), media_type="application/json")
            return StreamingResponse(_events(data), media_type="text/event-stream")

        return Starlette(routes=[Route("/v1/chat/completions", completions, methods=["POST"])])


def _offered(tools: Sequence[Mapping[str, Any]], choice: Any) -> set[str]:
    names = {tool_name(t) for t in tools}
    if isinstance(choice, Mapping) and choice.get("type") == "allowed_tools":
        allowed = {tool_name(t) for t in (choice.get("allowed_tools") or {}).get("tools") or ()}
        names &= allowed
    return names


def _events(data: Mapping[str, Any]) -> Iterator[bytes]:
    """The answer as chat chunks: role, then text or tool calls, then finish, then usage."""
    base = {k: data[k] for k in ("id", "created", "model")} | {"object": "chat.completion.chunk"}
    message = data["choices"][0]["message"]
    deltas: list[dict[str, Any]] = [{"role": "assistant", "content": ""}]
    if message.get("content"):
        deltas.append({"content": message["content"]})
    for i, call in enumerate(message.get("tool_calls") or ()):
        fn = call["function"]
        deltas.append(
            {
                "tool_calls": [
                    {
                        "index": i,
                        "id": call["id"],
                        "type": "function",
                        "function": {"name": fn["name"], "arguments": ""},
                    }
                ]
            }
        )
        deltas.append({"tool_calls": [{"index": i, "function": {"arguments": fn["arguments"]}}]})
    for delta in deltas:
        yield (
            b"data: "
            + orjson.dumps({**base, "choices": [{"index": 0, "delta": delta, "finish_reason": None}]})
            + b"\n\n"
        )
    finish = data["choices"][0]["finish_reason"]
    yield b"data: " + orjson.dumps({**base, "choices": [{"index": 0, "delta": {}, "finish_reason": finish}]}) + b"\n\n"
    yield b"data: " + orjson.dumps({**base, "choices": [], "usage": data["usage"]}) + b"\n\n"
    yield b"data: [DONE]\n\n"


@contextmanager
def serve_replay(replay: ReplayUpstream) -> Iterator[str]:
    """Serve ``replay`` on a free 127.0.0.1 port in a thread; yields its base URL (``.../v1``)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(replay.app(), host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 15
    while not server.started:
        if time.monotonic() > deadline:
            raise RuntimeError("replay upstream did not start")
        time.sleep(0.02)
    try:
        yield f"http://127.0.0.1:{port}/v1"
    finally:
        server.should_exit = True
        thread.join(timeout=10)
