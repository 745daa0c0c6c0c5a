"""A probe that measures how late the event loop wakes up, i.e. how long something blocked it.

Every request on a worker waits while the loop is blocked (a large tokenisation, a
synchronous summary, a slow regex), so the gateway promises that nothing blocks it for
more than 5 ms. The probe sleeps ``interval`` seconds in a loop and records how much later
than asked it woke up, into the ``ventana_event_loop_lag_ms`` histogram and ``max_ms``.
On a shared machine a late wake-up can also mean the OS ran another process, so the probe
also records the loop thread's own CPU time between two wake-ups
(``ventana_event_loop_busy_ms``, ``max_busy_ms``): a long blocking call shows in both, a
descheduled process only in the first.
It must wake often (1 ms) to catch short blocks, which costs a little CPU, so it is off
unless ``diagnostics.loop_lag_probe_ms`` is set in the config.
"""

from __future__ import annotations

import asyncio
import contextlib
import time

from gateway import metrics


class LoopLagProbe:
    def __init__(self, *, interval_s: float = 0.001) -> None:
        self.interval_s = interval_s
        self.max_ms = 0.0
        self.max_busy_ms = 0.0
        self.samples = 0
        self._task: asyncio.Task[None] | None = None

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            started, cpu = loop.time(), time.thread_time()
            await asyncio.sleep(self.interval_s)
            lag_ms = max(0.0, (loop.time() - started - self.interval_s) * 1000)
            busy_ms = (time.thread_time() - cpu) * 1000
            self.samples += 1
            self.max_ms = max(self.max_ms, lag_ms)
            self.max_busy_ms = max(self.max_busy_ms, busy_ms)
            metrics.LOOP_LAG_MS.observe(lag_ms)
            metrics.LOOP_BUSY_MS.observe(busy_ms)

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._run(), name="loop-lag-probe")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
