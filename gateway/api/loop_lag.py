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

A probe interval is only an upper bound of a block: several callbacks may run between two
wake-ups. ``CallbackTimer`` measures each callback the loop runs (a task's step from one
``await`` to the next, a timer, an I/O callback) by the loop thread's CPU time: the exact
length of every block, in ``ventana_event_loop_callback_ms``, and the slowest ones by name
(a task's coroutine), logged when one passes ``BLOCK_MS``. It wraps asyncio's
``Handle._run`` for the whole process, ~1 us a callback, so it is off unless
``diagnostics.time_callbacks`` is set, and then the gateway serves on asyncio's own loop:
uvloop runs callbacks from C, where they cannot be wrapped. A task step is the same Python
code on either loop, so its CPU is what it costs under uvloop too.
"""

from __future__ import annotations

import asyncio
import contextlib
import heapq
import logging
import time
from asyncio.events import Handle
from collections.abc import Callable
from typing import Any

from gateway import metrics

#: The gateway's promise: no callback holds the event loop longer than this (CPU ms).
BLOCK_MS = 5.0
log = logging.getLogger("ventana")


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


def callback_name(handle: Handle) -> str:
    """What a loop callback is: a task's coroutine, else the callback's own name."""
    callback = handle._callback  # type: ignore[attr-defined]
    owner = getattr(callback, "__self__", None)
    if isinstance(owner, asyncio.Task):
        coro = owner.get_coro()
        return "task " + getattr(coro, "__qualname__", type(coro).__name__)
    return getattr(callback, "__qualname__", type(callback).__name__)


def suspended_at(handle: Handle) -> str | None:
    """Where a task's step starts or ended: the innermost coroutine frame it waits in (file:line)."""
    owner = getattr(handle._callback, "__self__", None)  # type: ignore[attr-defined]
    if not isinstance(owner, asyncio.Task):
        return None
    coro: Any = owner.get_coro()
    frame = None
    while coro is not None:  # coroutines, async generators and generator-based awaitables
        frame = (
            getattr(coro, "cr_frame", None)
            or getattr(coro, "ag_frame", None)
            or getattr(coro, "gi_frame", None)
            or frame
        )
        coro = getattr(coro, "cr_await", None) or getattr(coro, "ag_await", None) or getattr(coro, "gi_yieldfrom", None)
    if frame is None:
        return None
    return f"{frame.f_code.co_filename.rsplit('/', 1)[-1]}:{frame.f_lineno}"


class CallbackTimer:
    """Times every callback of every asyncio loop in the process while installed."""

    def __init__(self, keep: int = 5) -> None:
        self.keep = keep
        self.callbacks = 0
        self.slowest: list[tuple[float, str]] = []  # a min-heap of the ``keep`` slowest (CPU ms, name)
        self._original: Callable[[Handle], Any] | None = None

    def install(self) -> None:
        if self._original is not None:
            return
        original = self._original = Handle._run
        timer = self

        def timed_run(handle: Handle) -> None:
            start = suspended_at(handle)
            cpu = time.thread_time()
            try:
                original(handle)
            finally:
                timer.observe((time.thread_time() - cpu) * 1000, handle, start)

        Handle._run = timed_run  # type: ignore[method-assign,assignment]

    def uninstall(self) -> None:
        if self._original is not None:
            Handle._run = self._original  # type: ignore[method-assign,assignment]
            self._original = None

    def observe(self, cpu_ms: float, handle: Handle, start: str | None = None) -> None:
        self.callbacks += 1
        metrics.LOOP_CALLBACK_MS.observe(cpu_ms)
        if len(self.slowest) < self.keep or cpu_ms > self.slowest[0][0]:
            name = callback_name(handle)
            if start is not None:  # a task's step: from where it resumed to where it waits now
                name += f" ({start} -> {suspended_at(handle) or 'done'})"
            (heapq.heappush if len(self.slowest) < self.keep else heapq.heapreplace)(self.slowest, (cpu_ms, name))
            if cpu_ms > BLOCK_MS:
                log.warning("the event loop was blocked for %.1f ms (CPU) by %s", cpu_ms, name)

    @property
    def max_ms(self) -> float:
        return max((ms for ms, _ in self.slowest), default=0.0)
