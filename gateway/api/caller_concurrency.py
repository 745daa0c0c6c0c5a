"""Cap how many requests one caller has in flight (``limits.max_concurrent_per_caller``).

The rate limit counts requests as they arrive; a caller holding hundreds of slow streams
open passes it and takes every pooled upstream connection from everyone else. This pure
ASGI middleware counts a caller's POSTs from arrival until the last byte of the answer
(streams included) and answers a 429 ``concurrency_limit_exceeded`` past the cap. The
caller is the same short key digest as everywhere else (``auth.caller_of``); per process,
like the rate limit.
"""

from __future__ import annotations

from collections import Counter

import orjson
from starlette.types import ASGIApp, Receive, Scope, Send

from gateway.api.auth import Access, caller_of
from gateway.errors import RateLimited


class CallerConcurrency:
    def __init__(self, app: ASGIApp, *, access: Access, limit: int) -> None:
        self.app = app
        self.access = access
        self.limit = limit
        self.in_flight: Counter[str] = Counter()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] != "POST":
            await self.app(scope, receive, send)
            return
        headers = {k.decode("latin-1"): v.decode("latin-1") for k, v in scope["headers"]}
        caller = caller_of(self.access.gateway_key(headers))
        if self.in_flight[caller] >= self.limit:
            await _refuse(send, self.limit)
            return
        self.in_flight[caller] += 1
        try:
            await self.app(scope, receive, send)
        finally:
            self.in_flight[caller] -= 1
            if not self.in_flight[caller]:
                del self.in_flight[caller]


async def _refuse(send: Send, limit: int) -> None:
    error = RateLimited(
        f"this key already has {limit} requests in flight (limits.max_concurrent_per_caller); retry when one ends",
        code="concurrency_limit_exceeded",
    )
    body = orjson.dumps(error.body())
    headers = [
        (b"content-type", b"application/json"),
        (b"retry-after", b"1"),
        (b"content-length", str(len(body)).encode()),
    ]
    await send({"type": "http.response.start", "status": error.status_code, "headers": headers})
    await send({"type": "http.response.body", "body": body})
