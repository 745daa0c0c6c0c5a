"""A minimal HTTP/1.1 keep-alive client on asyncio streams, for measuring servers, not itself.

On a 2-core machine the load generator competes with the servers it measures, so it
must cost as little as possible per request: a pre-encoded request, one persistent
connection per simulated client, and a response parser that only understands what
uvicorn sends (``content-length`` or ``transfer-encoding: chunked``). For streamed
answers it notes when the first body chunk (the first SSE event) arrives and when the
terminating chunk does.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from urllib.parse import urlsplit


@dataclass(frozen=True, slots=True)
class Timing:
    """One request: HTTP status, seconds to the first body byte and to the end."""

    status: int
    first: float
    end: float


class Target:
    """A server to send chat requests to: a base URL like ``http://127.0.0.1:8000/v1``."""

    def __init__(self, name: str, base_url: str, *, api_key: str = "sk-bench") -> None:
        parts = urlsplit(base_url)
        self.name = name
        self.host = parts.hostname or "127.0.0.1"
        self.port = parts.port or 80
        self.path = parts.path.rstrip("/") + "/chat/completions"
        self.api_key = api_key

    def request_bytes(self, body: bytes) -> bytes:
        head = (
            f"POST {self.path} HTTP/1.1\r\nhost: {self.host}:{self.port}\r\n"
            f"authorization: Bearer {self.api_key}\r\ncontent-type: application/json\r\n"
            f"content-length: {len(body)}\r\n\r\n"
        )
        return head.encode() + body


class Connection:
    """One keep-alive connection; reconnects when the server closes it."""

    def __init__(self, target: Target) -> None:
        self.target = target
        self._reader: asyncio.StreamReader | None = None
        self._writer: asyncio.StreamWriter | None = None

    async def _open(self) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        if self._reader is None or self._writer is None or self._writer.is_closing():
            self._reader, self._writer = await asyncio.open_connection(
                self.target.host, self.target.port, limit=1 << 24
            )
        return self._reader, self._writer

    async def send(self, payload: bytes) -> Timing:
        """Send one pre-encoded request and read the whole answer.

        A connection the server closed while it sat idle (uvicorn closes one after 5 s: a target's
        connection waits that long while another target answers a first 105K-token turn on a slow
        machine) ends before a byte of the answer: sent again on a new connection, once, as HTTP
        clients do with a stale keep-alive connection, and timed from there."""
        try:
            return await self._exchange(payload)
        except (asyncio.IncompleteReadError, ConnectionResetError) as exc:
            if isinstance(exc, asyncio.IncompleteReadError) and exc.partial:
                raise  # the server answered part of it, then closed: a failure to report, not a stale connection
            await self.close()
            return await self._exchange(payload)

    async def _exchange(self, payload: bytes) -> Timing:
        reader, writer = await self._open()
        started = time.perf_counter()
        writer.write(payload)
        head = await reader.readuntil(b"\r\n\r\n")
        status = int(head[9:12])
        lower = head.lower()
        if b"transfer-encoding: chunked" in lower:
            first = await self._read_chunked(reader, started)
        else:
            length = int(lower.split(b"content-length:", 1)[1].split(b"\r\n", 1)[0])
            await reader.readexactly(length)
            first = time.perf_counter() - started
        end = time.perf_counter() - started
        if b"connection: close" in lower:
            await self.close()
        return Timing(status, first, end)

    @staticmethod
    async def _read_chunked(reader: asyncio.StreamReader, started: float) -> float:
        first = 0.0
        while True:
            size = int((await reader.readline()).split(b";", 1)[0], 16)
            await reader.readexactly(size + 2)
            if not first:
                first = time.perf_counter() - started
            if size == 0:
                return first

    async def close(self) -> None:
        if self._writer is not None:
            self._writer.close()
            with contextlib.suppress(OSError):
                await self._writer.wait_closed()
        self._reader = self._writer = None


async def sequential(target: Target, body: bytes, n: int) -> list[Timing]:
    """``n`` requests one after another on one connection (the c=1 latency measurement)."""
    conn = Connection(target)
    payload = target.request_bytes(body)
    try:
        return [await conn.send(payload) for _ in range(n)]
    finally:
        await conn.close()


def shuffled(targets: Mapping[str, Target], k: int) -> list[tuple[str, Target]]:
    """The targets in the ``k``-th seeded random order: the slot right after direct measured 1-2 ms
    slower than the same gateway config in another slot, so no gateway keeps one place in the cycle
    (a rotation would keep each one right after the same neighbour)."""
    order = list(targets.items())
    random.Random(k).shuffle(order)
    return order


async def interleaved(targets: Mapping[str, Target], body: bytes, n: int, seed: int = 0) -> dict[str, list[Timing]]:
    """``n`` requests to every target, one connection each, the targets in a new ``shuffled`` order
    for every request (seeds ``seed * n`` on), so drift and the slot after direct hit all alike."""
    conns = {name: Connection(t) for name, t in targets.items()}
    payloads = {name: t.request_bytes(body) for name, t in targets.items()}
    timings: dict[str, list[Timing]] = {name: [] for name in targets}
    try:
        for i in range(n):
            for name, _ in shuffled(targets, seed * n + i):
                timings[name].append(await conns[name].send(payloads[name]))
    finally:
        for conn in conns.values():
            await conn.close()
    return timings


async def saturate(
    target: Target, body: bytes, clients: int, seconds: float, bodies: Sequence[bytes] = ()
) -> tuple[float, int]:
    """``clients`` connections sending back to back for ``seconds``: (requests/s, errors).

    With ``bodies``, the requests cycle through them instead of repeating ``body``.
    """
    payload = target.request_bytes(body)
    payloads = [target.request_bytes(b) for b in bodies]
    sent = 0
    conns = [Connection(target) for _ in range(clients)]
    for conn in conns:  # connect outside the timed window
        await conn._open()
    deadline = time.perf_counter() + seconds
    done = errors = 0

    async def worker(conn: Connection) -> None:
        nonlocal done, errors, sent
        while time.perf_counter() < deadline:
            if payloads:
                sent += 1
            timing = await conn.send(payloads[sent % len(payloads)] if payloads else payload)
            done += 1
            errors += timing.status != 200

    started = time.perf_counter()
    await asyncio.gather(*(worker(c) for c in conns))
    elapsed = time.perf_counter() - started
    for conn in conns:
        await conn.close()
    return done / elapsed, errors
