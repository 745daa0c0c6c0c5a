"""uvicorn's HTTP protocol, with a response's status line and headers sent in one write with its body.

uvicorn writes the head of a response (``http.response.start``) the moment the app sends it, and
the body (``http.response.body``) in a second write right after. On loopback each write is a TCP
segment that wakes the client: it reads the head, finds no body yet and sleeps again, and on a
small machine the wake-up takes the gateway's core in the middle of its answer. A tiny chat request
measured ~0.11 ms between the two writes (`benchmarks/RESULTS.md`, session 39, issue 39).

Here the head is held until the body's first bytes are written, and both go in one ``writelines``.
Nothing else changes: every byte goes out in the same order, a head whose body does not follow in
the same loop turn (a stream waiting for its provider) is written on the next turn, and closing or
aborting the connection writes a held head first. ``ventana serve`` passes the protocol to uvicorn
(``http=``); without httptools uvicorn's own choice stands.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from typing import Any, cast

try:
    from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol, RequestResponseCycle
except ImportError:  # httptools is not installed: uvicorn picks h11, unchanged
    HttpToolsProtocol = None  # type: ignore[assignment,misc]


class HeadWithBody:
    """The transport one request's response is written to: its head waits for its body's first bytes.

    The head is the first write after the cycle has started its response (uvicorn sets
    ``response_started`` before writing it); a ``100 Continue`` comes before that and goes out at once.
    """

    __slots__ = ("_cycle", "_head", "_head_seen", "_loop", "_transport")

    def __init__(self, transport: asyncio.Transport, cycle: Any, loop: asyncio.AbstractEventLoop) -> None:
        self._transport = transport
        self._cycle = cycle
        self._loop = loop
        self._head: bytes | None = None
        self._head_seen = False

    def write(self, data: bytes | bytearray | memoryview) -> None:
        head = self._head
        if head is not None:
            self._head = None
            self._transport.writelines((head, data))
        elif not self._head_seen and self._cycle.response_started:
            self._head_seen = True
            self._head = bytes(data)
            self._loop.call_soon(self.flush)  # a body that does not follow this turn: the head goes alone
        else:
            self._transport.write(data)

    def writelines(self, chunks: Iterable[bytes | bytearray | memoryview]) -> None:
        self.flush()
        self._transport.writelines(chunks)

    def flush(self) -> None:
        """Write a held head now."""
        head, self._head = self._head, None
        if head is not None and not self._transport.is_closing():
            self._transport.write(head)

    def close(self) -> None:
        self.flush()
        self._transport.close()

    def write_eof(self) -> None:
        self.flush()
        self._transport.write_eof()

    def abort(self) -> None:
        self.flush()  # on the wire first, as it would have been, then the connection is reset
        self._transport.abort()

    def is_closing(self) -> bool:
        return self._transport.is_closing()

    def __getattr__(self, name: str) -> Any:  # get_extra_info, get_write_buffer_size, ...
        return getattr(self._transport, name)


if HttpToolsProtocol is not None:

    class OneWriteHttpToolsProtocol(HttpToolsProtocol):
        """uvicorn's httptools protocol whose responses are written through ``HeadWithBody``."""

        def on_headers_complete(self) -> None:
            before = self.cycle
            super().on_headers_complete()
            cycle = self.cycle
            if cycle is not before and isinstance(cycle, RequestResponseCycle):  # not an upgrade
                cycle.transport = cast(asyncio.Transport, HeadWithBody(self.transport, cycle, self.loop))

    #: What ``ventana serve`` gives uvicorn as ``http=``.
    HTTP_PROTOCOL: type[asyncio.Protocol] | str = OneWriteHttpToolsProtocol
else:  # pragma: no cover - httptools is a dependency of uvicorn[standard]
    HTTP_PROTOCOL = "auto"
