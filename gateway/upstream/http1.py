"""The request path's HTTP/1.1 client: POST a body to an upstream, keep the connection for the next one.

Every forwarded request crosses this client twice (the body out, the answer back), so its cost is
on every request's latency. aiohttp spent ~125 us of the gateway's CPU a request against the
provider simulator (request and response objects, header multidicts, URL objects, timers, the
cookie jar); writing the request as prepared bytes and parsing the answer with httptools (the C
parser uvicorn already uses) spends ~35 (``benchmarks/RESULTS.md``, issue 39).

It does what forwarding to an OpenAI-compatible API needs and nothing more: POST, keep-alive
connections per origin (``http`` and ``https``), bodies sized by ``content-length``, chunked or
read to the close, gzip and deflate, a connect timeout and a timeout between two reads (aiohttp's
``sock_read``). No redirects, cookies or proxies: the aiohttp session it replaces had none either.

Errors are ``OSError``s (``ConnectionError`` for a connection that failed or closed early, ``ssl``
errors) or ``TimeoutError``s, ``ConnectTimeout`` when no connection was made.
"""

from __future__ import annotations

import asyncio
import contextlib
import ssl
import time
import zlib
from collections import deque
from collections.abc import AsyncGenerator, Mapping
from dataclasses import dataclass
from typing import cast
from urllib.parse import urlsplit

import httptools


class ConnectTimeout(TimeoutError):
    """No connection within the connect timeout: nothing was sent, so it is safe to try again."""


class ReadTimeout(TimeoutError):
    """Nothing arrived for the read timeout: the upstream may still be working on the request."""


class Disconnected(ConnectionError):
    """The upstream closed the connection before its answer ended."""


class ProtocolError(ConnectionError):
    """The upstream's bytes are not an HTTP/1.1 response."""


#: Unread body bytes above which a connection stops reading until its reader catches up.
HIGH_WATER = 1 << 20
#: An idle connection older than this is closed rather than reused (aiohttp's keep-alive default): a
#: connection a load balancer dropped without a word would otherwise swallow a request whole.
IDLE_S = 15.0


@dataclass(frozen=True, slots=True)
class Origin:
    scheme: str
    host: str
    port: int

    @property
    def host_header(self) -> str:
        default = 443 if self.scheme == "https" else 80
        host = f"[{self.host}]" if ":" in self.host else self.host
        return host if self.port == default else f"{host}:{self.port}"


def split_url(url: str) -> tuple[Origin, str]:
    """``https://api.example.com/v1/chat/completions`` as its origin and its request target."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"not an http(s) URL: {url!r}")
    port = parts.port or (443 if parts.scheme == "https" else 80)
    target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    return Origin(parts.scheme, parts.hostname, port), target


class _Connection(asyncio.Protocol):
    """One keep-alive connection and the response being read on it (one at a time)."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self.transport: asyncio.Transport | None = None
        self._parser = httptools.HttpResponseParser(self)
        self.closed = False
        self.idle_since: float | None = None  # when it went back to the pool; None while in use
        self._waiter: asyncio.Future[None] | None = None
        self.begin()

    def begin(self) -> None:
        """Forget the last response: the connection is about to carry a new request."""
        self.status = 0
        self.reason = ""
        self.headers: dict[str, str] = {}
        self.head_done = self.complete = self.keep_alive = False
        self.error: BaseException | None = None
        self._chunks: deque[bytes] = deque()
        self._buffered = 0
        self._paused = False
        self._sized = True  # content-length or chunked; else the body ends with the connection
        self._interim = False  # between a 1xx head and its end
        self._decoder: zlib._Decompress | None = None
        self.idle_since = None

    # asyncio.Protocol

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)  # uvloop's are not asyncio.Transport subclasses

    def data_received(self, data: bytes) -> None:
        if self.idle_since is not None:  # nothing is asked on an idle connection (a 408 before closing, say)
            self.close()
            return
        try:
            self._parser.feed_data(data)
        except httptools.HttpParserError as exc:
            self.error = ProtocolError(f"malformed HTTP response from the upstream: {exc}")
            self.close()
        except zlib.error as exc:
            self.error = ProtocolError(f"undecodable compressed body from the upstream: {exc}")
            self.close()
        self._wake()

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        if self.head_done and not self.complete and not self._sized and self.error is None:
            self.complete = True  # a body without a length ends with its connection
        elif not self.complete and self.error is None:
            reason = f": {type(exc).__name__}: {exc}" if exc is not None else ""
            self.error = Disconnected(f"the upstream closed the connection before its answer ended{reason}")
        self._wake()

    # httptools callbacks

    def on_status(self, status: bytes) -> None:
        self.reason = status.decode("latin-1")

    def on_header(self, name: bytes, value: bytes) -> None:
        key = name.decode("latin-1").lower()
        text = value.decode("latin-1")
        self.headers[key] = f"{self.headers[key]}, {text}" if key in self.headers else text

    def on_headers_complete(self) -> None:
        status = self._parser.get_status_code()
        if 100 <= status < 200:  # an interim answer (103 Early Hints from a CDN, say): the real one follows
            self._interim = True
            self.headers = {}
            return
        self.status = status
        self.head_done = True
        headers = self.headers
        self._sized = "content-length" in headers or "chunked" in headers.get("transfer-encoding", "").lower()
        coding = headers.get("content-encoding", "").lower()
        if coding in ("gzip", "x-gzip", "deflate"):
            self._decoder = zlib.decompressobj(zlib.MAX_WBITS | 32)  # either header, told apart by its bytes

    def on_body(self, body: bytes) -> None:
        if self._decoder is not None:
            body = self._decoder.decompress(body)
        if body:
            self._chunks.append(body)
            self._buffered += len(body)
            if self._buffered > HIGH_WATER and not self._paused and self.transport is not None:
                self.transport.pause_reading()
                self._paused = True

    def on_message_complete(self) -> None:
        if self._interim:
            self._interim = False
            return
        if self._decoder is not None:
            tail = self._decoder.flush()
            if tail:
                self._chunks.append(tail)
                self._buffered += len(tail)
        self.complete = True
        self.keep_alive = self._parser.should_keep_alive()

    # the reader's side

    def take(self) -> bytes:
        """The body bytes read so far and not taken yet."""
        if not self._chunks:
            return b""
        data = self._chunks.popleft() if len(self._chunks) == 1 else b"".join(self._chunks)
        self._chunks.clear()
        self._buffered = 0
        if self._paused and self.transport is not None:
            self._paused = False
            self.transport.resume_reading()
        return data

    async def wait(self, timeout: float) -> None:
        """Until something arrives (bytes, the end, a failure), at most ``timeout`` seconds."""
        waiter = self._waiter = self._loop.create_future()
        timer = self._loop.call_later(timeout, _expire, waiter, timeout)
        try:
            await waiter
        finally:
            timer.cancel()
            self._waiter = None

    def _wake(self) -> None:
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    def close(self) -> None:
        self.closed = True
        if self.transport is not None:
            self.transport.close()


def _expire(waiter: asyncio.Future[None], timeout: float) -> None:
    if not waiter.done():
        waiter.set_exception(ReadTimeout(f"nothing read from the upstream for {timeout:g} s"))


class Response:
    """An upstream's answer: status and headers now, the body as it is read."""

    def __init__(self, conn: _Connection, pool: Pool, origin: Origin) -> None:
        self._conn = conn
        self._pool = pool
        self._origin = origin
        self.status = conn.status
        self.reason = conn.reason
        self.headers: Mapping[str, str] = conn.headers  # names in lower case
        self._released = False

    async def read(self) -> bytes:
        """The whole body. A short answer has mostly arrived whole with its head: then it is taken as it is,
        without the reader's generator."""
        if self._conn.complete:
            return self._conn.take()
        return b"".join([data async for data in self.iter_any()])

    async def iter_any(self) -> AsyncGenerator[bytes, None]:
        """The body in the pieces it arrives in (what arrived together comes as one)."""
        conn = self._conn
        while True:
            data = conn.take()
            if data:
                yield data
                continue
            if conn.complete:
                return
            if conn.error is not None:
                raise conn.error
            await conn.wait(self._pool.read_timeout)

    def buffered(self) -> bytes:
        """Body bytes that arrived and were not read yet, without waiting."""
        return self._conn.take()

    def __del__(self) -> None:  # an answer dropped unreleased (its reader failed) still frees its socket
        if not self._released:
            with contextlib.suppress(Exception):  # a loop already closed at interpreter exit
                self._conn.close()

    def release(self) -> None:
        """Give the connection back for the next request when its answer was read to the end; else close it."""
        if self._released:
            return
        self._released = True
        conn = self._conn
        if conn.complete and conn.keep_alive and not conn.closed and conn.error is None:
            self._pool.keep(self._origin, conn)
        else:
            conn.close()


class Pool:
    """Keep-alive connections per origin. Callers bound how many are open at once (``max_connections``)."""

    def __init__(self, *, connect_timeout: float, read_timeout: float) -> None:
        self.connect_timeout = connect_timeout
        self.read_timeout = read_timeout
        self._idle: dict[Origin, list[_Connection]] = {}
        self._urls: dict[str, tuple[Origin, str]] = {}
        self._ssl: ssl.SSLContext | None = None

    async def post(self, url: str, body: bytes, headers: Mapping[str, str]) -> Response:
        """Send ``body`` to ``url``; the answer once its status and headers are in."""
        split = self._urls.get(url)
        if split is None:
            split = self._urls[url] = split_url(url)
        origin, target = split
        head = _head(target, origin, headers, len(body))
        # A connection the upstream closes as it is taken (an idle connection's race) fails like any
        # closed connection: the caller's retries decide, and count the attempt.
        conn = self._reuse(origin) or await self._connect(origin)
        return await self._exchange(conn, origin, head, body)

    async def _exchange(self, conn: _Connection, origin: Origin, head: bytes, body: bytes) -> Response:
        conn.begin()
        assert conn.transport is not None
        try:
            conn.transport.writelines((head, body))
            while not conn.head_done:
                if conn.error is not None:
                    raise conn.error
                await conn.wait(self.read_timeout)
        except BaseException:
            conn.close()
            raise
        return Response(conn, self, origin)

    def _reuse(self, origin: Origin) -> _Connection | None:
        idle = self._idle.get(origin)
        now = time.monotonic()
        while idle:
            conn = idle.pop()
            transport = conn.transport
            fresh = conn.idle_since is not None and now - conn.idle_since < IDLE_S
            if fresh and not conn.closed and transport is not None and not transport.is_closing():
                return conn
            conn.close()
        return None

    async def _connect(self, origin: Origin) -> _Connection:
        loop = asyncio.get_running_loop()
        conn = _Connection(loop)
        context = self._context() if origin.scheme == "https" else None
        opening = loop.create_connection(
            lambda: conn, origin.host, origin.port, ssl=context, server_hostname=origin.host if context else None
        )
        try:
            await asyncio.wait_for(opening, self.connect_timeout)
        except TimeoutError:
            where = f"{origin.host}:{origin.port}"
            raise ConnectTimeout(f"no connection to {where} within {self.connect_timeout:g} s") from None
        return conn

    def _context(self) -> ssl.SSLContext:
        """The system's trust store (``SSL_CERT_FILE`` and ``SSL_CERT_DIR`` honoured), loaded once."""
        if self._ssl is None:
            self._ssl = ssl.create_default_context()
        return self._ssl

    def keep(self, origin: Origin, conn: _Connection) -> None:
        conn.idle_since = time.monotonic()
        self._idle.setdefault(origin, []).append(conn)

    async def close(self) -> None:
        """Close the idle connections; they are closed when this returns (a transport tells its protocol on
        the next loop turn)."""
        for idle in self._idle.values():
            for conn in idle:
                conn.close()
        self._idle.clear()
        await asyncio.sleep(0)


def _head(target: str, origin: Origin, headers: Mapping[str, str], length: int) -> bytes:
    lines = [f"POST {target} HTTP/1.1", f"host: {origin.host_header}", "accept-encoding: gzip, deflate"]
    for name, value in headers.items():
        if "\r" in value or "\n" in value or "\r" in name or "\n" in name or ":" in name:
            raise ValueError(f"header {name!r} holds a line break or a colon")
        lines.append(f"{name}: {value}")
    lines.append(f"content-length: {length}\r\n\r\n")
    return "\r\n".join(lines).encode("latin-1")
