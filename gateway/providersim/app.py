"""The simulator's HTTP surface: ``POST /v1/chat/completions``, ``POST /v1/responses``, ``POST /v1/messages``
and ``GET /v1/models``.

Answers are deterministic (a function of the request), so tests can compare what the
client received with what the simulator sent. A tool call is returned when the request
forces one (``tool_choice`` "required" or naming a function). ``--record`` appends every
received body as one JSON line, so tests see exactly what the gateway forwarded.
"""

from __future__ import annotations

import asyncio
import hashlib
import re
import time
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from functools import partial
from pathlib import Path
from typing import Any

import orjson
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route

from gateway.providersim.cache_models import CacheModel, cache_model_for, default_kind, prompt_blocks
from gateway.providersim.cutter import ConnectionCutter
from gateway.providersim.faults import FaultPlan
from gateway.providersim.messages import create_message
from gateway.providersim.responses import responses
from gateway.tokens import content_text, counter_for, encoding_for_model

_JSON = "application/json"


def _error(status: int, message: str, kind: str = "invalid_request_error") -> Response:
    body = {"error": {"message": message, "type": kind, "param": None, "code": None}}
    return Response(orjson.dumps(body), status_code=status, media_type=_JSON)


def _answer_text(messages: list[Mapping[str, Any]], max_tokens: int | None = None) -> str:
    last_user = next(
        (
            text
            for m in reversed(messages)
            if m.get("role") == "user" and not (text := content_text(m.get("content"))[0]).startswith("<reminder>")
        ),
        "",
    )
    digest = hashlib.sha256(orjson.dumps(messages)).hexdigest()[:8]
    summary_request = any(
        "<transcript" in content_text(m.get("content"))[0] for m in messages if m.get("role") == "user"
    )
    if summary_request:
        return _echo_summary(messages, max_tokens)
    return f"Simulated answer {digest} to: {last_user[:60]}"


def _echo_summary(messages: list[Mapping[str, Any]], max_tokens: int | None = None) -> str:
    """Answer a summarisation request the way a terse model would: keep the clauses that carry facts.

    Every transcript line is ``speaker: text``; of each line only the clauses with a digit
    survive (``speaker: clause; clause``), tool-call lines are kept whole, and an earlier
    summary folded in as ``summary so far:`` lines keeps its text. The answer honours
    ``max_tokens`` (about 3 characters a token), cutting at a line end.
    """
    text = "\n".join(content_text(m.get("content"))[0] for m in messages if m.get("role") == "user")
    body = text.split("<transcript", 1)[-1].split("\n", 1)[-1].split("</transcript>", 1)[0]
    lines: list[str] = []
    for line in body.splitlines():
        line = line.strip().removeprefix("summary so far: ")
        speaker, _, said = line.partition(": ")
        if " called" in speaker or line.startswith("- "):
            lines.append(line)
            continue
        clauses = [c for c in re.split(r"(?<=[.;,])\s+", said) if any(ch.isdigit() for ch in c)]
        if clauses:
            lines.append(f"{speaker}: {' '.join(clauses)}")
    limit = max_tokens * 3 if max_tokens else 20000
    out = "\n".join(lines[:400])
    return out[:limit].rsplit("\n", 1)[0] if len(out) > limit else out


def _forced_tool(body: Mapping[str, Any]) -> Mapping[str, Any] | None:
    tools = body.get("tools") or []
    choice = body.get("tool_choice")
    if not tools:
        return None
    if choice == "required":
        return tools[0].get("function", {})
    if isinstance(choice, Mapping) and isinstance(choice.get("function"), Mapping):
        name = choice["function"].get("name")
        return next((t["function"] for t in tools if t.get("function", {}).get("name") == name), None)
    return None


def _arguments(fn: Mapping[str, Any]) -> str:
    props = (fn.get("parameters") or {}).get("properties") or {}
    required = (fn.get("parameters") or {}).get("required") or list(props)
    sample = {"string": "example", "integer": 1, "number": 1.0, "boolean": True, "array": [], "object": {}}
    return orjson.dumps(
        {k: sample.get((props.get(k) or {}).get("type", "string"), "example") for k in required}
    ).decode()


class Simulator:
    def __init__(
        self,
        *,
        record: str | None = None,
        latency_ms: float = 0.0,
        cache: bool = True,
        cache_models: Mapping[str, str] | None = None,
        cut_port: int | None = None,
    ) -> None:
        self.cutter: ConnectionCutter | None = None
        self.cut_port = cut_port
        self.record_path = Path(record) if record else None
        self.latency_s = latency_ms / 1000
        self.cache_enabled = cache
        self.cache_kinds = dict(cache_models or {})
        self.caches: dict[str, CacheModel] = {}
        self.faults = FaultPlan()
        self.requests = 0
        self.port = 0

    def _record(self, raw: bytes) -> None:
        if self.record_path is not None:
            line = raw.strip()
            if b"\n" in line:  # pretty-printed JSON: one line per body keeps the file JSONL
                line = orjson.dumps(orjson.loads(line))
            with self.record_path.open("ab") as fh:
                fh.write(line + b"\n")

    def _cache(self, model: str) -> CacheModel:
        found = self.caches.get(model)
        if found is None:
            kind = self.cache_kinds.get(model) or self.cache_kinds.get("*") or default_kind(model)
            found = self.caches[model] = cache_model_for(kind, model)
        return found

    def usage(self, body: Mapping[str, Any]) -> dict[str, Any]:
        model = str(body.get("model", ""))
        counter = counter_for(encoding_for_model(model))
        if not self.cache_enabled:
            # Without cache accounting only the count is needed: the memoised counter gives the
            # same number as the token sequence (tests check it) without re-encoding every turn,
            # so a benchmark's direct baseline is a provider with no latency of its own.
            prompt_tokens, read, write, cache = (
                counter.request(body.get("messages") or [], body.get("tools")),
                0,
                0,
                None,
            )
        else:
            prompt = prompt_blocks(counter, body.get("messages") or [], body.get("tools"))
            prompt_tokens = sum(len(b) for b in prompt.blocks)
            cache = self._cache(model)
            result = cache.account(prompt)
            read, write = result.read, result.write
        usage: dict[str, Any] = {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": 0,
            "total_tokens": prompt_tokens,
            "prompt_tokens_details": {"cached_tokens": read, "audio_tokens": 0},
            "completion_tokens_details": {"reasoning_tokens": 0, "audio_tokens": 0},
        }
        if cache is not None and cache.name == "anthropic":
            usage["cache_read_input_tokens"] = read
            usage["cache_creation_input_tokens"] = write
        return usage

    async def chat(self, request: Request) -> Response:
        raw = await request.body()
        self.requests += 1
        try:
            body = orjson.loads(raw)
        except orjson.JSONDecodeError:
            return _error(400, "body is not valid JSON")
        if not isinstance(body, dict) or not isinstance(body.get("messages"), list):
            return _error(400, "'messages' is required")
        self._record(raw)
        fault = self.faults.take()
        if fault is not None and fault.before_answer:
            return await fault.respond(request.headers.get("authorization", ""))
        if self.latency_s:
            await asyncio.sleep(self.latency_s)
        messages = body["messages"]
        usage = self.usage(body)
        tool = _forced_tool(body)
        limit = body.get("max_tokens") or body.get("max_completion_tokens")
        text = None if tool else _answer_text(messages, limit if isinstance(limit, int) else None)
        usage["completion_tokens"] = max(1, len((text or "").split()))
        usage["total_tokens"] = usage["prompt_tokens"] + usage["completion_tokens"]
        completion_id = "chatcmpl-sim" + hashlib.sha256(raw).hexdigest()[:16]
        if body.get("stream"):
            return StreamingResponse(
                self._stream(body, completion_id, text, tool, usage, fault), media_type="text/event-stream"
            )
        message: dict[str, Any] = {"role": "assistant", "content": text, "refusal": None}
        if tool:
            message["tool_calls"] = [
                {
                    "id": "call_" + completion_id[-12:],
                    "type": "function",
                    "function": {"name": tool.get("name"), "arguments": _arguments(tool)},
                }
            ]
        answer = {
            "id": completion_id,
            "object": "chat.completion",
            "created": int(time.time()),
            "model": body.get("model"),
            "choices": [
                {"index": 0, "message": message, "finish_reason": "tool_calls" if tool else "stop", "logprobs": None}
            ],
            "usage": usage,
            "system_fingerprint": "fp_ventana_sim",
        }
        if fault is not None and fault.kind == "malformed":
            return Response(b'{"id": "broken", "choices": [', media_type=_JSON)
        return Response(orjson.dumps(answer), media_type=_JSON)

    async def _stream(
        self,
        body: Mapping[str, Any],
        completion_id: str,
        text: str | None,
        tool: Mapping[str, Any] | None,
        usage: dict[str, Any],
        fault: Any,
    ) -> AsyncIterator[bytes]:
        include_usage = bool((body.get("stream_options") or {}).get("include_usage"))
        base = {
            "id": completion_id,
            "object": "chat.completion.chunk",
            "created": int(time.time()),
            "model": body.get("model"),
            "system_fingerprint": "fp_ventana_sim",
        }

        def chunk(delta: dict[str, Any], finish: str | None = None) -> bytes:
            payload = {**base, "choices": [{"index": 0, "delta": delta, "finish_reason": finish, "logprobs": None}]}
            if include_usage:
                payload["usage"] = None
            return b"data: " + orjson.dumps(payload) + b"\n\n"

        yield chunk({"role": "assistant", "content": "", "refusal": None})
        if tool:
            call = {
                "index": 0,
                "id": "call_" + completion_id[-12:],
                "type": "function",
                "function": {"name": tool.get("name"), "arguments": _arguments(tool)},
            }
            yield chunk({"tool_calls": [call]})
        else:
            words = (text or "").split(" ")
            for i, word in enumerate(words):
                if fault is not None and fault.kind == "drop_stream" and i >= len(words) // 2:
                    raise ConnectionResetError("simulated mid-stream drop")
                if fault is not None and fault.kind == "slow_stream":
                    await asyncio.sleep(fault.seconds)
                if fault is not None and fault.kind == "malformed" and i == len(words) // 2:
                    yield b'data: {"id": "broken", "choices": [\n\n'
                yield chunk({"content": word if i == 0 else " " + word})
        yield chunk({}, "tool_calls" if tool else "stop")
        if include_usage:
            yield b"data: " + orjson.dumps({**base, "choices": [], "usage": usage}) + b"\n\n"
        yield b"data: [DONE]\n\n"

    async def messages(self, request: Request) -> Response:
        return await create_message(self, request)

    async def models(self, request: Request) -> Response:
        data = [
            {"id": m, "object": "model", "created": 0, "owned_by": "ventana-sim"}
            for m in ("gpt-4o-mini", "gpt-4o", "gpt-4.1")
        ]
        return Response(orjson.dumps({"object": "list", "data": data}), media_type=_JSON)

    async def control_faults(self, request: Request) -> Response:
        spec = orjson.loads(await request.body() or b"{}")
        try:
            closes = self.faults.load(spec)
        except ValueError as exc:
            return _error(400, str(exc))
        if closes:
            if self.cutter is None:
                return _error(400, "'close' faults need the simulator started with --cut-port")
            self.cutter.arm(closes)
        cut_pending = self.cutter.pending() if self.cutter is not None else 0
        return Response(orjson.dumps({"queued": self.faults.pending(), "close": cut_pending}), media_type=_JSON)

    async def reset(self, request: Request) -> Response:
        self.caches.clear()
        self.faults = FaultPlan()
        if self.cutter is not None:
            self.cutter.reset()
        return Response(b"{}", media_type=_JSON)

    @asynccontextmanager
    async def lifespan(self, app: Starlette) -> AsyncIterator[None]:
        """Start the connection cutter beside the app when a cut port was asked for."""
        if self.cut_port is None:
            yield
            return
        self.cutter = ConnectionCutter("127.0.0.1", self.port)
        await self.cutter.start("127.0.0.1", self.cut_port)
        try:
            yield
        finally:
            await self.cutter.close()


def create_sim_app(
    *,
    record: str | None = None,
    latency_ms: float = 0.0,
    cache: bool = True,
    cache_models: Mapping[str, str] | None = None,
    port: int | None = None,
    cut_port: int | None = None,
) -> Starlette:
    """The simulator app; with ``cut_port`` (and the ``port`` it serves on) a ConnectionCutter fronts it."""
    sim = Simulator(record=record, latency_ms=latency_ms, cache=cache, cache_models=cache_models, cut_port=cut_port)
    sim.port = port or 0
    app = Starlette(
        lifespan=sim.lifespan,
        routes=[
            Route("/v1/chat/completions", sim.chat, methods=["POST"]),
            Route("/chat/completions", sim.chat, methods=["POST"]),
            Route("/v1/responses", partial(responses, sim), methods=["POST"]),
            Route("/responses", partial(responses, sim), methods=["POST"]),
            Route("/v1/messages", sim.messages, methods=["POST"]),
            Route("/v1/models", sim.models, methods=["GET"]),
            Route("/_sim/faults", sim.control_faults, methods=["POST"]),
            Route("/_sim/reset", sim.reset, methods=["POST"]),
        ],
    )
    app.state.sim = sim
    return app
