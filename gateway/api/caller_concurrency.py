"""Cap how many requests one caller has in flight (``limits.max_concurrent_per_caller``).

The rate limit counts requests as they arrive; a caller holding hundreds of slow streams
open passes it and takes every pooled upstream connection from everyone else. This pure
ASGI middleware counts a caller's POSTs from arrival until the last byte of the answer
(streams included) and answers a 429 ``concurrency_limit_exceeded`` past the cap. The
caller is the request's ``Principal`` (``admission.py``), named here once and kept in the scope
for the route; per process, like the rate limit. A request admission refuses passes through to
the route, which answers the 401 in its door's shape. The 429 is in the door's shape too
(Anthropic's on ``/v1/messages``, OpenAI's elsewhere).
"""

from __future__ import annotations

from collections import Counter

import orjson
from starlette.types import ASGIApp, Receive, Scope, Send

from gateway.api.admission import Admission, admit_scope
from gateway.errors import RateLimited, VentanaError
from gateway.formats.anthropic_messages import error_body


class CallerConcurrency:
    def __init__(self, app: ASGIApp, *, admission: Admission, limit: int) -> None:
        self.app = app
        self.admission = admission
        self.limit = limit
        self.in_flight: Counter[str] = Counter()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] != "POST":
            await self.app(scope, receive, send)
            return
        try:
            caller = admit_scope(self.admission, scope).caller
        except VentanaError:  # refused: the route answers it, in its door's shape
            await self.app(scope, receive, send)
            return
        if self.in_flight[caller] >= self.limit:
            await _refuse(send, self.limit, anthropic="/messages" in str(scope.get("path", "")))
            return
        self.in_flight[caller] += 1
        try:
            await self.app(scope, receive, send)
        finally:
            self.in_flight[caller] -= 1
            if not self.in_flight[caller]:
                del self.in_flight[caller]


async def _refuse(send: Send, limit: int, *, anthropic: bool) -> None:
    error = RateLimited(
        f"this key already has {limit} requests in flight (limits.max_concurrent_per_caller); retry when one ends",
        code="concurrency_limit_exceeded",
    )
    body = orjson.dumps(error_body(error.status_code, error.message) if anthropic else error.body())
    headers = [
        (b"content-type", b"application/json"),
        (b"retry-after", b"1"),
        (b"content-length", str(len(body)).encode()),
    ]
    await send({"type": "http.response.start", "status": error.status_code, "headers": headers})
    await send({"type": "http.response.body", "body": body})
