"""The least a Python proxy on Ventana's stack adds to a request: the floor under ``benchmarks.overhead``.

    python -m benchmarks.floor_proxy --port 8001 --upstream http://127.0.0.1:8000

A bare ASGI app served as ``ventana serve`` serves the gateway (uvicorn, its ``auto`` loop and HTTP
parser: uvloop and httptools), forwarding each ``POST .../chat/completions`` body as it came through
the gateway's own upstream client (``gateway.upstream.http1.Pool``) and relaying the provider's bytes
as they arrive (a stream's events too). No parsing, no assembly, no record, no middleware: what is
left is the hop itself (two more sockets, two more HTTP parses, one more process woken).
``benchmarks.overhead --floor`` measures it in the same interleaved rounds as Ventana and LiteLLM, so
Ventana's figure can be read as that hop plus the gateway's own work, on the same machine in the same
minute.

With ``--sleep-ms`` or ``--burn-ms`` it is a slow neighbour instead (``benchmarks.overhead --neighbour``):
a proxy that waits, or computes in plain Python, before forwarding, as LiteLLM's proxy takes 10-29 ms a
request. In a run with it, what LiteLLM's presence does to the other targets can be told apart from
what LiteLLM itself does.
"""

from __future__ import annotations

import argparse
import asyncio
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable, Iterator, MutableMapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import uvicorn

from gateway.config import UpstreamConfig
from gateway.upstream.http1 import Pool, Response
from gateway.upstream.openai_compat import retryable_exception
from tests.procs import _env, free_port, stop, wait_http

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]

_JSON = [(b"content-type", b"application/json")]
#: Attempts after the first when the upstream connection fails (the gateway's ``upstream.max_retries``).
RETRIES = UpstreamConfig().max_retries


class FloorProxy:
    """Forward every POST's body to ``upstream`` + its path after ``/v1``; answer anything else 200 (health)."""

    def __init__(self, upstream: str, *, sleep_ms: float = 0.0, burn_ms: float = 0.0) -> None:
        self._upstream = upstream.rstrip("/")
        self._pool: Pool | None = None
        self._sleep_s = sleep_ms / 1000
        self._burn_s = burn_ms / 1000

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await self._lifespan(receive, send)
            return
        if scope["method"] != "POST":
            await _answer(send, 200, b"{}")
            return
        pieces: list[bytes] = []
        more = True
        while more:  # a 105K-token body comes in ~64 KB pieces: joined once, not grown piece by piece
            message = await receive()
            pieces.append(message.get("body", b""))
            more = message.get("more_body", False)
        body = b"".join(pieces)
        if self._sleep_s:  # a slow neighbour that waits (as on its own provider)
            await asyncio.sleep(self._sleep_s)
        if self._burn_s:  # one that computes, in plain Python, as LiteLLM's proxy does for 10-20 ms
            _burn(self._burn_s)
        if self._pool is None:  # made on the server's loop
            self._pool = Pool(connect_timeout=10.0, read_timeout=60.0)
        headers = {"content-type": "application/json", "authorization": "Bearer sk-floor"}
        response = await self._post(self._upstream + scope["path"], body, headers)
        kind = response.headers.get("content-type", "application/json").encode()
        await send({"type": "http.response.start", "status": response.status, "headers": [(b"content-type", kind)]})
        async for data in response.iter_any():  # a stream's events relayed as they arrive
            await send({"type": "http.response.body", "body": data, "more_body": True})
        response.release()
        await send({"type": "http.response.body", "body": b""})

    async def _post(self, url: str, body: bytes, headers: dict[str, str]) -> Response:
        """``Pool.post``, tried again (up to ``RETRIES`` times) when the connection fails, as the gateway's own
        upstream client does: at 32 clients a kept-alive connection the provider closes as it is taken
        otherwise fails the request (12 of a c=32 stream cell once), and the floor must fail no more than
        what it stands beside."""
        assert self._pool is not None
        for attempt in range(RETRIES + 1):
            try:
                return await self._pool.post(url, body, headers)
            except (TimeoutError, OSError) as exc:
                if attempt == RETRIES or not retryable_exception(exc):
                    raise
        raise AssertionError("unreachable")

    async def _lifespan(self, receive: Receive, send: Send) -> None:
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                if self._pool is not None:
                    await self._pool.close()
                await send({"type": "lifespan.shutdown.complete"})
                return


def _burn(seconds: float) -> None:
    ends = time.thread_time() + seconds
    total = 0
    while time.thread_time() < ends:
        total += sum(range(100))


async def _answer(send: Send, status: int, content: bytes) -> None:
    await send({"type": "http.response.start", "status": status, "headers": _JSON})
    await send({"type": "http.response.body", "body": content})


@contextmanager
def run_floor(tmp: Path, upstream: str, *, sleep_ms: float = 0.0, burn_ms: float = 0.0) -> Iterator[str]:
    """Start the floor proxy in front of ``upstream`` (the provider's URL without ``/v1``); yield its base URL.
    ``sleep_ms`` or ``burn_ms``: a slow neighbour instead (``benchmarks.overhead --neighbour``)."""
    port = free_port()
    cmd = [sys.executable, "-m", "benchmarks.floor_proxy", "--port", str(port), "--upstream", upstream]
    cmd += ["--sleep-ms", str(sleep_ms), "--burn-ms", str(burn_ms)]
    with (tmp / f"floor-{port}.log").open("wb") as log:
        proc = subprocess.Popen(cmd, env=_env(), stdout=log, stderr=subprocess.STDOUT)
    try:
        wait_http(f"http://127.0.0.1:{port}/healthz", proc=proc)
        yield f"http://127.0.0.1:{port}/v1"
    finally:
        stop(proc)


def neighbour_delay(spec: str) -> dict[str, float] | None:
    """A ``--neighbour`` of ``sleep=MS`` or ``burn=MS`` as ``run_floor``'s keyword for that slow neighbour; None
    for any other spec, which each caller refuses in its own words."""
    kind, _, ms = spec.partition("=")
    if kind not in ("sleep", "burn") or not ms:
        return None
    return {f"{kind}_ms": float(ms)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--upstream", required=True, help="the provider's base URL, without /v1")
    parser.add_argument("--sleep-ms", type=float, default=0.0, help="wait this long before forwarding")
    parser.add_argument("--burn-ms", type=float, default=0.0, help="spend this much CPU in Python before forwarding")
    args = parser.parse_args()
    app = FloorProxy(args.upstream, sleep_ms=args.sleep_ms, burn_ms=args.burn_ms)
    uvicorn.run(app, host="127.0.0.1", port=args.port, log_level="warning", access_log=False)


if __name__ == "__main__":
    main()
