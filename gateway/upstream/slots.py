"""How many connections each upstream may have open at once, and how long a request waits for one.

The connection pool (``http1.Pool``) opens as many connections as it is asked for; the count is
kept here so that waiting for one has a limit and a clear error (with aiohttp's own pool, 200 slow
streams made an unrelated request wait 9 s). One count per upstream (its base URL): a provider
whose streams are slow fills its own slots, never another's (one shared count made a request to
another provider wait 4.1 s behind 200 slow streams, issue 35).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from gateway.errors import GatewayBusy


class Slots:
    def __init__(self, max_connections: int, timeout_s: float) -> None:
        self.max_connections = max_connections
        self.timeout_s = timeout_s
        self._counts: dict[str, asyncio.Semaphore] = {}

    async def take(self, upstream: str) -> Callable[[], None]:
        """Wait up to ``timeout_s`` for a connection to ``upstream``; return what gives it back."""
        slots = self._counts.get(upstream)
        if slots is None:
            slots = self._counts[upstream] = asyncio.Semaphore(self.max_connections)
        if not slots.locked():  # a free slot: taken now, without wait_for's task and timer (two loop turns)
            await slots.acquire()
            return slots.release
        try:
            await asyncio.wait_for(slots.acquire(), self.timeout_s)
        except TimeoutError:
            raise GatewayBusy(
                f"all {self.max_connections} connections to this upstream stayed busy for "
                f"{self.timeout_s:g} s (upstream.max_connections, upstream.pool_timeout_s)",
                headers={"retry-after": "1"},
            ) from None
        return slots.release
