"""The simulator's HTTP surface: ``POST /v1/chat/completions``, ``POST /v1/responses``, ``POST /v1/messages``
and ``GET /v1/models``.

Answers are deterministic (a function of the request), so tests can compare what the
client received with what the simulator sent. What the model says (tool calls, structured
output, ``n``, logprobs, replayed turns) is decided in ``completion.py`` and ``replay.py``;
this module only speaks HTTP: recording, faults, SSE. ``Simulator.answer`` is the seam the
other front doors (Responses, Messages) translate through. ``--record`` appends every
received body as one JSON line, so tests see exactly what the gateway forwarded.
"""

from __future__ import annotations

import asyncio
import hashlib
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
from gateway.providersim.completion import complete
from gateway.providersim.cutter import ConnectionCutter
from gateway.providersim.faults import FaultPlan
from gateway.providersim.messages import create_message
from gateway.providersim.replay import Replayer, load_transcripts
from gateway.providersim.responses import responses
from gateway.tokens import counter_for, encoding_for_model

_JSON = "application/json"
#: Caches kept at once (one per model and prompt_cache_key); past it the oldest is dropped.
MAX_KEYED_CACHES = 4096


def _error(status: int, message: str, kind: str = "invalid_request_error") -> Response:
    body = {"error": {"message": message, "type": kind, "param": None, "code": None}}
    return Response(orjson.dumps(body), status_code=status, media_type=_JSON)


class Simulator:
    def __init__(
        self,
        *,
        record: str | None = None,
        latency_ms: float = 0.0,
        cache: bool = True,
        cache_models: Mapping[str, str] | None = None,
        cut_port: int | None = None,
        replayer: Replayer | None = None,
    ) -> None:
        self.replayer = replayer
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
        #: The Anthropic headers each ``/v1/messages`` request came with, oldest first (the body log
        #: has no room for them), so a test sees which betas and version reached the provider.
        self.messages_headers: list[dict[str, str]] = []

    def _record(self, raw: bytes) -> None:
        if self.record_path is not None:
            line = raw.strip()
            if b"\n" in line:  # pretty-printed JSON: one line per body keeps the file JSONL
                line = orjson.dumps(orjson.loads(line))
            with self.record_path.open("ab") as fh:
                fh.write(line + b"\n")

    def _cache(self, model: str, key: str | None = None) -> CacheModel:
        """The cache a request reads: the model's, or with a ``prompt_cache_key`` that key's own.

        OpenAI routes requests that share a key to the same cache, and requests with other keys
        elsewhere; the simulator keeps one cache per (model, key), so two keys never read each
        other's prefixes, and requests without a key share the model's.
        """
        name = model if key is None else f"{model}#{key}"
        found = self.caches.get(name)
        if found is None:
            if len(self.caches) >= MAX_KEYED_CACHES:
                self.caches.pop(next(iter(self.caches)))  # the oldest: a long run of sessions stays bounded
            kind = self.cache_kinds.get(model) or self.cache_kinds.get("*") or default_kind(model)
            found = self.caches[name] = cache_model_for(kind, model)
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
            key = body.get("prompt_cache_key")
            cache = self._cache(model, key if isinstance(key, str) and key else None)
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

    async def chat(self, request: Request, *, record: bool = True) -> Response:
        """Answer a chat body; ``record=False`` when another door recorded the body it received."""
        raw = await request.body()
        self.requests += 1
        try:
            body = orjson.loads(raw)
        except orjson.JSONDecodeError:
            return _error(400, "body is not valid JSON")
        if not isinstance(body, dict) or not isinstance(body.get("messages"), list):
            return _error(400, "'messages' is required")
        if record:
            self._record(raw)
        fault = self.faults.take()
        if fault is not None and fault.before_answer:
            return await fault.respond(request.headers.get("authorization", ""))
        if self.latency_s:
            await asyncio.sleep(self.latency_s)
        answer = self.answer(body, "chatcmpl-sim" + hashlib.sha256(raw).hexdigest()[:16])
        if body.get("stream"):
            return StreamingResponse(self._stream(body, answer, fault), media_type="text/event-stream")
        if fault is not None and fault.kind == "malformed":
            return Response(b'{"id": "broken", "choices": [', media_type=_JSON)
        return Response(orjson.dumps(answer), media_type=_JSON)

    def answer(self, body: Mapping[str, Any], completion_id: str) -> dict[str, Any]:
        """The chat completion for a Chat Completions body (replayed in replay mode, cache-accounted).

        Other front doors turn their request into such a body and translate this answer back."""
        return complete(body, completion_id=completion_id, usage=self.usage(body), message=self.replayed(body))

    def replayed(self, body: Mapping[str, Any]) -> Mapping[str, Any] | None:
        """The transcript's next assistant message in replay mode, else None (the model invents one)."""
        if self.replayer is None:
            return None
        verdict = self.replayer.answer(body)
        if verdict.outcome == "miss" and self.record_path is not None:
            # Beside the request log, not in it: that file stays one received body per line.
            miss = {"transcript": verdict.transcript, "turn": verdict.turn, "tools": list(verdict.missing)}
            with Path(str(self.record_path) + ".misses").open("ab") as fh:
                fh.write(orjson.dumps(miss) + b"\n")
        return verdict.message

    async def stats(self, request: Request) -> Response:
        """Replay's tally (replayed, find_tools, miss, unmatched, ended, and each miss), the request count and
        the Anthropic headers of each Messages request."""
        replay = self.replayer.stats() if self.replayer is not None else None
        body = {"requests": self.requests, "replay": replay, "messages_headers": self.messages_headers}
        return Response(orjson.dumps(body), media_type=_JSON)

    async def _stream(self, body: Mapping[str, Any], answer: Mapping[str, Any], fault: Any) -> AsyncIterator[bytes]:
        """Relay ``answer`` as SSE chunks: words (tokens when logprobs were asked), then the finish."""
        include_usage = bool((body.get("stream_options") or {}).get("include_usage"))
        base = {
            "id": answer["id"],
            "object": "chat.completion.chunk",
            "created": answer["created"],
            "model": body.get("model"),
            "system_fingerprint": "fp_ventana_sim",
        }

        def chunk(index: int, delta: dict[str, Any], finish: str | None = None, logprobs: Any = None) -> bytes:
            choice = {"index": index, "delta": delta, "finish_reason": finish, "logprobs": logprobs}
            payload = {**base, "choices": [choice]}
            if include_usage:
                payload["usage"] = None
            return b"data: " + orjson.dumps(payload) + b"\n\n"

        for choice in answer["choices"]:
            index, message = choice["index"], choice["message"]
            yield chunk(index, {"role": "assistant", "content": "", "refusal": None})
            if message.get("reasoning_content"):  # a replayed reasoning model's turn
                yield chunk(index, {"reasoning_content": message["reasoning_content"]})
            for n, call in enumerate(message.get("tool_calls") or []):
                yield chunk(index, {"tool_calls": [{"index": n, **call}]})
            text = message.get("content")
            if isinstance(text, str) and text:
                logprobs = (choice.get("logprobs") or {}).get("content")
                pieces = [e["token"] for e in logprobs] if logprobs is not None else text.split(" ")
                if logprobs is None:
                    pieces = [w if i == 0 else " " + w for i, w in enumerate(pieces)]
                for i, piece in enumerate(pieces):
                    if index == 0 and fault is not None:
                        if fault.kind == "drop_stream" and i >= len(pieces) // 2:
                            raise ConnectionResetError("simulated mid-stream drop")
                        if fault.kind == "slow_stream":
                            await asyncio.sleep(fault.seconds)
                        if fault.kind == "malformed" and i == len(pieces) // 2:
                            yield b'data: {"id": "broken", "choices": [\n\n'
                    entry = None if logprobs is None else {"content": [logprobs[i]], "refusal": None}
                    yield chunk(index, {"content": piece}, logprobs=entry)
            yield chunk(index, {}, choice["finish_reason"])
        if include_usage:
            yield b"data: " + orjson.dumps({**base, "choices": [], "usage": answer["usage"]}) + b"\n\n"
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
        self.messages_headers.clear()
        if self.replayer is not None:
            self.replayer.reset()
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
    replay: str | None = None,
) -> Starlette:
    """The simulator app; with ``cut_port`` (and the ``port`` it serves on) a ConnectionCutter fronts it.

    ``replay`` names an agent_loops-shaped JSONL file whose transcripts answer the requests.
    """
    replayer = Replayer(load_transcripts(replay)) if replay else None
    sim = Simulator(
        record=record,
        latency_ms=latency_ms,
        cache=cache,
        cache_models=cache_models,
        cut_port=cut_port,
        replayer=replayer,
    )
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
            Route("/sim/stats", sim.stats, methods=["GET"]),
            # Other front doors (Responses, Messages) add their routes here and answer through
            # gateway.providersim.completion.complete, the same brain as chat.
        ],
    )
    app.state.sim = sim
    return app
