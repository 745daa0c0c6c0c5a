"""A database outage another process can suffer: a TcpProxy on its own event loop thread.

``TcpProxy`` is asyncio code; a gateway under test runs in a separate process and the
test (or the load benchmark) is synchronous, so the proxy gets a loop of its own in a
daemon thread. The gateway's ``database_url`` points at the proxy's port; ``cut()``
refuses new connections and cuts open ones (the server itself keeps running, so other
engineers' databases on the shared server are untouched), ``restore()`` accepts again.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Coroutine, Iterator
from contextlib import contextmanager
from typing import Any

from tests.procs import free_port
from tests.store.tcp_proxy import TcpProxy

PG_TARGET = ("127.0.0.1", 5432)


class DatabaseOutage:
    """Switch a TCP path to the database on and off from synchronous code."""

    def __init__(self, target: tuple[str, int] = PG_TARGET) -> None:
        self.port = free_port()
        self._proxy = TcpProxy(self.port, target)
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name=f"db-proxy-{self.port}", daemon=True)
        self._thread.start()
        self.up = False

    def url_through(self, database_url: str) -> str:
        """``database_url`` (on 127.0.0.1:5432) rerouted through the proxy, with a short connect timeout."""
        host = f"{PG_TARGET[0]}:{PG_TARGET[1]}"
        assert host in database_url, f"expected a URL on {host}, got {database_url}"
        return database_url.replace(host, f"127.0.0.1:{self.port}") + "?connect_timeout=2"

    def restore(self) -> None:
        """Accept connections to the database again."""
        self._call(self._proxy.start())
        self.up = True

    def cut(self) -> None:
        """Refuse new connections and cut every open one, as a database that went away."""
        self._call(self._proxy.stop())
        self.up = False

    def close(self) -> None:
        self._call(self._proxy.stop())
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(5)
        self._loop.close()

    def _call(self, coro: Coroutine[Any, Any, None]) -> None:
        asyncio.run_coroutine_threadsafe(coro, self._loop).result(10)


@contextmanager
def database_outage() -> Iterator[DatabaseOutage]:
    """A proxy to the local PostgreSQL, up on entry, closed on exit."""
    outage = DatabaseOutage()
    try:
        outage.restore()
        yield outage
    finally:
        outage.close()
