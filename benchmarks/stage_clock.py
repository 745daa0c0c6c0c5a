"""Thread-CPU time per named stage of the real request path, wrapped at its seams by the benchmark.

The gateway's code carries no timer: ``benchmarks.stage_costs`` swaps the seams of one in-process
gateway (module functions of ``gateway.api.chat`` and ``gateway.api.answer``, and the long-lived
objects on ``Gateway``: sessions, conversation index, resent history, upstream, recorder, edges)
for wrappers that time them, so a served gateway pays nothing and the table is of the code that
serves requests.

Times are the CPU of the thread a stage ran on (``time.thread_time_ns``): on a shared, loaded
machine wall time mostly measures the scheduler. Stages nest; each stage is charged its own time
(its children's subtracted), so the stages of a request add up to the loop's CPU for it. A stage
that awaits is charged its own steps only: while it is suspended the loop runs other tasks and
callbacks (the record's look-ahead in the provider's wait, another request's steps), which are
charged to their own stages or to the glue, not to it as well. The frame stack lives in a context
variable, so tasks and loop callbacks each extend the frame they were started from.
"""

from __future__ import annotations

import functools
import threading
import time
from collections.abc import Awaitable, Callable, Generator
from contextvars import ContextVar
from typing import Any, Generic, ParamSpec, TypeVar, cast

P = ParamSpec("P")
R = TypeVar("R")


class _Frame:
    __slots__ = ("child", "name", "parent", "paused", "start", "thread")

    def __init__(self, name: str, parent: _Frame | None) -> None:
        self.name = name
        self.parent = parent
        self.thread = threading.get_ident()
        self.child = 0
        self.paused = 0  # CPU the thread spent elsewhere while this stage was suspended
        self.start = time.thread_time_ns()


_CURRENT: ContextVar[_Frame | None] = ContextVar("stage_clock_frame", default=None)


class StageClock:
    """Accumulates each stage's own CPU (ns) until ``take`` hands them over and starts afresh."""

    def __init__(self) -> None:
        self.spent: dict[str, int] = {}
        self.calls = 0
        self.loop_thread = threading.get_ident()

    def take(self) -> tuple[dict[str, int], int]:
        spent, calls = self.spent, self.calls
        self.spent, self.calls = {}, 0
        return spent, calls

    def _enter(self, name: str) -> tuple[_Frame, Any]:
        frame = _Frame(name, _CURRENT.get())
        return frame, _CURRENT.set(frame)

    def _exit(self, frame: _Frame, token: Any) -> None:
        elapsed = time.thread_time_ns() - frame.start - frame.paused
        parent = frame.parent
        if parent is not None and parent.thread == frame.thread:
            parent.child += elapsed
        name = frame.name if frame.thread == self.loop_thread else frame.name + " [worker thread]"
        self.spent[name] = self.spent.get(name, 0) + elapsed - frame.child
        self.calls += 1
        _CURRENT.reset(token)

    def sync(self, name: str, fn: Callable[P, R]) -> Callable[P, R]:
        @functools.wraps(fn)
        def timed(*args: P.args, **kwargs: P.kwargs) -> R:
            frame, token = self._enter(name)
            try:
                return fn(*args, **kwargs)
            finally:
                self._exit(frame, token)

        return timed

    def coro(self, name: str, fn: Callable[P, Awaitable[R]]) -> Callable[P, Awaitable[R]]:
        @functools.wraps(fn)
        def timed(*args: P.args, **kwargs: P.kwargs) -> Awaitable[R]:
            return _Steps(self, name, fn(*args, **kwargs))

        return timed

    def auto(self, name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        """``coro`` for a coroutine function, ``sync`` for anything else."""
        import inspect

        return self.coro(name, fn) if inspect.iscoroutinefunction(fn) else self.sync(name, fn)


class _Steps(Generic[R]):
    """An awaitable stage: its frame is open from its first step to its last, and the time between a step
    that suspends it and the one that resumes it is counted as ``paused``, not as its own."""

    __slots__ = ("awaited", "clock", "name")

    def __init__(self, clock: StageClock, name: str, awaited: Awaitable[R]) -> None:
        self.clock = clock
        self.name = name
        self.awaited = awaited

    def __await__(self) -> Generator[Any, Any, R]:
        frame, token = self.clock._enter(self.name)
        steps = self.awaited.__await__()
        value: Any = None
        error: BaseException | None = None
        try:
            while True:
                try:
                    yielded = steps.send(value) if error is None else steps.throw(error)
                except StopIteration as stop:
                    return cast(R, stop.value)
                suspended = time.thread_time_ns()
                try:
                    value, error = (yield yielded), None
                except GeneratorExit:
                    steps.close()
                    raise
                except BaseException as exc:  # thrown in by the task (a cancellation): passed on inside
                    value, error = None, exc
                frame.paused += time.thread_time_ns() - suspended
        finally:
            self.clock._exit(frame, token)


class Timed:
    """``target`` with some of its methods timed as named stages; everything else passed through."""

    def __init__(self, target: Any, clock: StageClock, methods: dict[str, str]) -> None:
        object.__setattr__(self, "_target", target)
        for method, stage in methods.items():
            object.__setattr__(self, method, clock.auto(stage, getattr(target, method)))

    def __getattr__(self, name: str) -> Any:
        return getattr(object.__getattribute__(self, "_target"), name)


def span_cost_ns(clock: StageClock, samples: int = 2_000) -> float:
    """The CPU one timed call of an empty function adds (two clock reads and the frame), median ns."""
    import statistics

    empty = clock.sync("calibration", lambda: None)
    costs = []
    for _ in range(samples):
        started = time.thread_time_ns()
        empty()
        costs.append(time.thread_time_ns() - started)
    clock.take()
    return statistics.median(costs)
