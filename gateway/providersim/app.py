"""The simulator's HTTP surface: ``POST /v1/chat/completions`` and ``GET /v1/models``.

Answers are deterministic (a function of the request), so tests can compare what the
client received with what the simulator sent. A tool call is returned when the request
forces one (``tool_choice`` "required" or naming a function). ``--record`` appends every
received body as one JSON line, so tests see exactly what the gateway forwarded.
"""

from __future__ import annotations

import asyncio
import hashlib
import time
from collections.abc import AsyncIterator, Mapping
from pathlib import Path
from typing import Any

import orjson
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route

from gateway.providersim.cache import PrefixCache, prompt_token_ids
from gateway.providersim.faults import FaultPlan
from gateway.tokens import content_text, counter_for, encoding_for_model

_JSON = "application/json"


def _error(status: int, message: str, kind: str = "invalid_request_error") -> Response:
    body = {"error": {"message": message, "type": kind, "param": None, "code": None}}
    return Response(orjson.dumps(body), status_code=status, media_type=_JSON)


def _answer_text(messages: list[Mapping[str, Any]]) -> str:
    last_user = next((content_text(m.get("content"))[0] for m in reversed(messages) if m.get("role") == "user"), "")
    digest = hashlib.sha256(orjson.dumps(messages)).hexdigest()[:8]
    summary_request = any(
        "<transcript" in content_text(m.get("content"))[0] for m in messages if m.get("role") == "user"
    )
    if summary_request:
        return _echo_summary(messages)
    return f"Simulated answer {digest} to: {last_user[:60]}"


def _echo_summary(messages: list[Mapping[str, Any]]) -> str:
    """Answer a summarisation request by keeping the transcript lines that carry facts."""
    text = "\n".join(content_text(m.get("content"))[0] for m in messages if m.get("role") == "user")
    body = text.split("<transcript", 1)[-1]
    lines = [ln.strip() for ln in body.splitlines() if any(ch.isdigit() for ch in ln) or ":" in ln]
    return "\n".join(lines[:400])[:20000]


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
    def __init__(self, *, record: str | None = None, latency_ms: float = 0.0, cache: bool = True) -> None:
        self.record_path = Path(record) if record else None
        self.latency_s = latency_ms / 1000
        self.cache = PrefixCache() if cache else None
        self.faults = FaultPlan()
        self.requests = 0

    def _record(self, raw: bytes) -> None:
        if self.record_path is not None:
            line = raw.strip()
            if b"\n" in line:  # pretty-printed JSON: one line per body keeps the file JSONL
                line = orjson.dumps(orjson.loads(line))
            with self.record_path.open("ab") as fh:
                fh.write(line + b"\n")

    def usage(self, body: Mapping[str, Any]) -> dict[str, Any]:
        counter = counter_for(encoding_for_model(str(body.get("model", ""))))
        if self.cache is None:
            # Without cache accounting only the count is needed: the memoised counter gives the
            # same number as the token sequence (tests check it) without re-encoding every turn,
            # so a benchmark's direct baseline is a provider with no latency of its own.
            prompt, cached = counter.request(body.get("messages") or [], body.get("tools")), 0
        else:
            ids = prompt_token_ids(counter, body.get("messages") or [], body.get("tools"))
            prompt, cached = len(ids), self.cache.lookup_and_store(ids)
        return {
            "prompt_tokens": prompt,
            "completion_tokens": 0,
            "total_tokens": prompt,
            "prompt_tokens_details": {"cached_tokens": cached, "audio_tokens": 0},
            "completion_tokens_details": {"reasoning_tokens": 0, "audio_tokens": 0},
        }

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
            return await fault.respond()
        if self.latency_s:
            await asyncio.sleep(self.latency_s)
        messages = body["messages"]
        usage = self.usage(body)
        tool = _forced_tool(body)
        text = None if tool else _answer_text(messages)
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
                yield chunk({"content": word if i == 0 else " " + word})
        yield chunk({}, "tool_calls" if tool else "stop")
        if include_usage:
            yield b"data: " + orjson.dumps({**base, "choices": [], "usage": usage}) + b"\n\n"
        yield b"data: [DONE]\n\n"

    async def models(self, request: Request) -> Response:
        data = [
            {"id": m, "object": "model", "created": 0, "owned_by": "ventana-sim"}
            for m in ("gpt-4o-mini", "gpt-4o", "gpt-4.1")
        ]
        return Response(orjson.dumps({"object": "list", "data": data}), media_type=_JSON)

    async def control_faults(self, request: Request) -> Response:
        spec = orjson.loads(await request.body() or b"{}")
        self.faults.load(spec)
        return Response(orjson.dumps({"queued": self.faults.pending()}), media_type=_JSON)

    async def reset(self, request: Request) -> Response:
        if self.cache is not None:
            self.cache = PrefixCache()
        self.faults = FaultPlan()
        return Response(b"{}", media_type=_JSON)


def create_sim_app(*, record: str | None = None, latency_ms: float = 0.0, cache: bool = True) -> Starlette:
    sim = Simulator(record=record, latency_ms=latency_ms, cache=cache)
    app = Starlette(
        routes=[
            Route("/v1/chat/completions", sim.chat, methods=["POST"]),
            Route("/chat/completions", sim.chat, methods=["POST"]),
            Route("/v1/models", sim.models, methods=["GET"]),
            Route("/_sim/faults", sim.control_faults, methods=["POST"]),
            Route("/_sim/reset", sim.reset, methods=["POST"]),
        ]
    )
    app.state.sim = sim
    return app
