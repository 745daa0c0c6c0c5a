"""Serve an app built in this process on a real loopback port, like httpx's ``serve_in_thread``.

For checks that must look inside the gateway (the Recorder it was given, its log), the
gateway runs under uvicorn in a thread of the test process; clients still talk HTTP.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from typing import Any

import uvicorn
from starlette.types import ASGIApp

from tests.procs import free_port


@contextmanager
def serve_in_thread(app: ASGIApp) -> Iterator[str]:
    """Run ``app`` (lifespan included) on a free port; yield its base URL, stop it on exit."""
    port = free_port()
    # log_config=None: uvicorn's records propagate to the root logger, where caplog sees them.
    config = uvicorn.Config(app, host="127.0.0.1", port=port, log_config=None, access_log=False)
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, name=f"uvicorn-{port}", daemon=True)
    thread.start()
    deadline = time.monotonic() + 15
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise RuntimeError(f"in-process server on port {port} did not start")
        time.sleep(0.02)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(15)


def post_scope(path: str, body_length: int | None = None) -> dict[str, Any]:
    """The ASGI scope of a JSON ``POST path`` from a loopback client, for driving an app without a server
    (``content-length`` when the body's length is given)."""
    headers = [(b"host", b"127.0.0.1"), (b"content-type", b"application/json")]
    if body_length is not None:
        headers.append((b"content-length", str(body_length).encode()))
    return {
        "type": "http",
        "asgi": {"version": "3.0", "spec_version": "2.3"},
        "http_version": "1.1",
        "method": "POST",
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "query_string": b"",
        "root_path": "",
        "headers": headers,
        "client": ("127.0.0.1", 50000),
        "server": ("127.0.0.1", 8080),
        "state": {},
    }


def body_once(raw: bytes, gone: asyncio.Event) -> Callable[[], Awaitable[dict[str, Any]]]:
    """An ASGI ``receive`` for a client that sends ``raw`` as the whole body, then stays connected until ``gone``
    is set (a server's next ``receive`` is its disconnect)."""
    delivered = False

    async def receive() -> dict[str, Any]:
        nonlocal delivered
        if not delivered:
            delivered = True
            return {"type": "http.request", "body": raw, "more_body": False}
        await gone.wait()
        return {"type": "http.disconnect"}

    return receive
