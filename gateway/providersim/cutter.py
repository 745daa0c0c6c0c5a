"""A tiny TCP front for the simulator that can close a connection before answering.

An ASGI app cannot drop a connection without a response: uvicorn answers 500 when the
app returns or raises before starting one. So the "close" fault lives one layer down:
``ConnectionCutter`` listens on its own port, pipes bytes to the simulator's port, and,
while armed, closes the client's connection the moment a new request arrives, before
the simulator sees a byte of it. The gateway then sees exactly what a crashed or
overloaded provider produces: a connection closed without a response.

Request boundaries are inferred per connection (HTTP/1.1 without pipelining, which is
what httpx sends): the first client bytes after a response (or on a fresh connection)
start a new request.
"""

from __future__ import annotations

import asyncio
import contextlib


class ConnectionCutter:
    def __init__(self, target_host: str, target_port: int) -> None:
        self.target_host = target_host
        self.target_port = target_port
        self._armed = 0
        self.cut = 0  # connections closed so far
        self._server: asyncio.Server | None = None

    def arm(self, times: int) -> None:
        """Close the next ``times`` requests' connections before they reach the simulator."""
        self._armed += max(0, times)

    def pending(self) -> int:
        return self._armed

    def reset(self) -> None:
        self._armed = 0

    async def start(self, host: str, port: int) -> None:
        self._server = await asyncio.start_server(self._handle, host, port)

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
            with contextlib.suppress(Exception):
                await self._server.wait_closed()

    async def _handle(self, client_r: asyncio.StreamReader, client_w: asyncio.StreamWriter) -> None:
        upstream_w: asyncio.StreamWriter | None = None
        state = {"new_request": True}
        try:
            first = await client_r.read(65536)
            if not first or self._take():
                return
            upstream_r, upstream_w = await asyncio.open_connection(self.target_host, self.target_port)
            upstream_w.write(first)
            state["new_request"] = False
            pipes = {
                asyncio.create_task(self._client_to_upstream(client_r, upstream_w, state)),
                asyncio.create_task(self._upstream_to_client(upstream_r, client_w, state)),
            }
            done, pending = await asyncio.wait(pipes, return_when=asyncio.FIRST_EXCEPTION)
            for task in pending:
                task.cancel()
            await asyncio.gather(*pending, return_exceptions=True)
            for task in done:
                if task.exception() is not None and not isinstance(task.exception(), ConnectionError):
                    raise task.exception()  # type: ignore[misc]
        except ConnectionError:
            return
        finally:
            for writer in (client_w, upstream_w):
                if writer is not None:
                    writer.close()

    def _take(self) -> bool:
        if self._armed <= 0:
            return False
        self._armed -= 1
        self.cut += 1
        return True

    async def _client_to_upstream(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, state: dict[str, bool]
    ) -> None:
        while data := await reader.read(65536):
            if state["new_request"] and self._take():
                raise ConnectionResetError("cut before answering")
            state["new_request"] = False
            writer.write(data)
            await writer.drain()
        writer.close()

    async def _upstream_to_client(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, state: dict[str, bool]
    ) -> None:
        while data := await reader.read(65536):
            state["new_request"] = True
            writer.write(data)
            await writer.drain()
        writer.close()
