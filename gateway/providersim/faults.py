"""Fault switches for the simulator, queued through ``POST /_sim/faults``.

Body: ``{"faults": [{"kind": "status", "status": 429, "retry_after": "1", "times": 2}, ...]}``.
Kinds: ``status`` (an error status, with ``retry_after`` or without), ``hang`` (sleep
``seconds`` before answering), ``malformed`` (a truncated JSON body, or a stream chunk
that is not JSON half way), ``drop_stream`` (cut a stream half way), ``slow_stream``
(sleep ``seconds`` before each streamed word), ``echo_key`` (a 401
whose message quotes the Authorization header, as real providers do for bad keys), and
``close`` (close the connection before answering; needs the simulator's cutter port, see
``cutter.py``, and is counted there rather than in this queue).
Each queued fault applies to the next ``times`` chat requests, in order.
"""

from __future__ import annotations

import asyncio
from collections import deque
from dataclasses import dataclass
from typing import Any

import orjson
from starlette.responses import Response

KINDS = frozenset({"status", "hang", "malformed", "drop_stream", "slow_stream", "echo_key", "close"})


@dataclass(frozen=True, slots=True)
class Fault:
    kind: str
    status: int = 500
    retry_after: str | None = None
    seconds: float = 0.0

    @property
    def before_answer(self) -> bool:
        return self.kind in ("status", "hang", "echo_key")

    async def respond(self, authorization: str = "") -> Response:
        if self.kind == "echo_key":
            key = authorization[7:] if authorization[:7].lower() == "bearer " else authorization
            quoted = {"error": {"message": f"Incorrect API key provided: {key}", "type": "invalid_request_error"}}
            return Response(orjson.dumps(quoted), status_code=401, media_type="application/json")
        if self.kind == "hang":
            await asyncio.sleep(self.seconds)
            return Response(b'{"error": {"message": "late"}}', status_code=504, media_type="application/json")
        headers = {"retry-after": self.retry_after} if self.retry_after else {}
        body = {"error": {"message": f"simulated {self.status}", "type": "server_error", "param": None, "code": None}}
        return Response(orjson.dumps(body), status_code=self.status, headers=headers, media_type="application/json")


class FaultPlan:
    def __init__(self) -> None:
        self._queue: deque[Fault] = deque()

    def load(self, spec: dict[str, Any]) -> int:
        """Queue the faults in ``spec``; return how many ``close`` faults it asked for (not queued here)."""
        closes = 0
        for item in spec.get("faults", ()):
            kind = item.get("kind")
            if kind not in KINDS:
                raise ValueError(f"unknown fault kind {kind!r}; expected one of {sorted(KINDS)}")
            if kind == "close":
                closes += int(item.get("times", 1))
                continue
            fault = Fault(
                kind=kind,
                status=int(item.get("status", 500)),
                retry_after=item.get("retry_after"),
                seconds=float(item.get("seconds", 0.0)),
            )
            self._queue.extend([fault] * int(item.get("times", 1)))
        return closes

    def take(self) -> Fault | None:
        return self._queue.popleft() if self._queue else None

    def pending(self) -> int:
        return len(self._queue)
