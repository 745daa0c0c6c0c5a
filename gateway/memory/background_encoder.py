"""Passage vectors made in a child process at the lowest priority, for archives too large to wait for.

A large archive's vectors are given in the background (``edges/memory.py``, ``EMBED_BEFORE_NEXT_TURN``):
~350 passages after the first compaction of a 105K-token agent session, 35-90 s of MiniLM. Made in a
thread of the gateway they held the GIL against the event loop (numpy's layers release it, the encoder's
Python between them does not): every request the gateway answered meanwhile waited for it, a 105K-token
request +4.64 ms instead of +3.2-3.7 and a small one +2.73 instead of +1.7 (``benchmarks.overhead``,
RESULTS, session 46). A child process shares no GIL, and at ``nice`` 19 it takes only the CPU nothing
else wants. It is started on the first large archive and kept (one encoder, ~100 MB).

Nothing in the gateway waits on it in a thread: ``encode`` is awaited on the loop. A first version
blocked a worker thread of the loop's default executor per batch; on a busy machine the child got no
CPU, every worker thread waited on it, and the archive writes and summaries prepared ahead queued
behind them: requests stalled for minutes (session 47). The child also dies with the gateway
(``child_process``): one killed with the gateway kept encoding, an orphan, at nice 19.
If the child cannot be started or dies, the vectors are made in a worker thread, one batch at a time.
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool

import numpy as np

from gateway.child_process import one_child_pool
from gateway.memory import vectors

log = logging.getLogger("ventana.memory")
#: The child's niceness: the gateway's own requests, and every other process, come first.
NICE = 19


class BackgroundEncoder:
    """``vectors.encode`` in one child process at ``NICE``, awaited on the event loop."""

    def __init__(self) -> None:
        self._pool: ProcessPoolExecutor | None = None
        self._broken = False

    async def encode(self, texts: Sequence[str]) -> np.ndarray | None:
        pool = self._pool if self._pool is not None or self._broken else await asyncio.to_thread(self._start)
        if pool is not None:
            try:
                return await asyncio.wrap_future(pool.submit(vectors.encode, list(texts)))
            except (BrokenProcessPool, OSError, RuntimeError):  # killed, or shut down under us
                log.warning("the background encoder stopped; memory vectors are made in a gateway thread")
                self._broken = True
        return await asyncio.to_thread(vectors.encode, list(texts))

    def _start(self) -> ProcessPoolExecutor | None:
        """The child, started off the loop (a spawn is a new interpreter). Only the loop calls ``encode``."""
        if self._pool is None and not self._broken:
            try:
                self._pool = one_child_pool(nice=NICE)
                self._pool.submit(os.getpid)  # the child is spawned here, in this thread, not on the loop
            except (OSError, ValueError):
                log.warning("no background encoder process; memory vectors are made in a gateway thread")
                self._broken = True
        return self._pool

    def close(self) -> None:
        """Stop the child; a batch it is encoding is dropped (its passages keep ranking by their words)."""
        pool, self._pool = self._pool, None
        if pool is not None:
            pool.shutdown(wait=False, cancel_futures=True)
