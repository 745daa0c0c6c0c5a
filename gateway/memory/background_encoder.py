"""Passage vectors made in a child process at the lowest priority, for archives too large to wait for.

A large archive's vectors are given in the background (``edges/memory.py``, ``EMBED_BEFORE_NEXT_TURN``):
~350 passages after the first compaction of a 105K-token agent session, 35-90 s of MiniLM. Made in a
thread of the gateway they held the GIL against the event loop (numpy's layers release it, the encoder's
Python between them does not): every request the gateway answered meanwhile waited for it, a 105K-token
request +4.64 ms instead of +3.2-3.7 and a small one +2.73 instead of +1.7 (``benchmarks.overhead``,
RESULTS, session 46). A child process shares no GIL, and at ``nice`` 19 it takes only the CPU nothing
else wants. It is started on the first large archive and kept (one encoder, ~100 MB); if it cannot be
started or dies, the vectors are made in the calling thread as before.
"""

from __future__ import annotations

import logging
import multiprocessing
import os
import threading
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool

import numpy as np

from gateway.memory import vectors

log = logging.getLogger("ventana.memory")
#: The child's niceness: the gateway's own requests, and every other process, come first.
NICE = 19


def _lowest_priority() -> None:
    os.nice(NICE)


class BackgroundEncoder:
    """``vectors.encode`` in one child process at ``NICE``; called from worker threads, one text batch at a time."""

    def __init__(self) -> None:
        self._pool: ProcessPoolExecutor | None = None
        self._lock = threading.Lock()
        self._broken = False

    def encode(self, texts: Sequence[str]) -> np.ndarray | None:
        pool = self._started()
        if pool is not None:
            try:
                return pool.submit(vectors.encode, list(texts)).result()
            except (BrokenProcessPool, OSError, RuntimeError):  # killed, or shut down under us
                log.warning("the background encoder stopped; memory vectors are made in the gateway")
                self._broken = True
        return vectors.encode(texts)

    def _started(self) -> ProcessPoolExecutor | None:
        with self._lock:
            if self._pool is None and not self._broken:
                try:
                    context = multiprocessing.get_context("spawn")  # never fork a process with threads
                    self._pool = ProcessPoolExecutor(1, mp_context=context, initializer=_lowest_priority)
                except (OSError, ValueError):
                    log.warning("no background encoder process; memory vectors are made in the gateway")
                    self._broken = True
            return None if self._broken else self._pool

    def close(self) -> None:
        """Stop the child; a batch it is encoding is dropped (its passages keep ranking by their words)."""
        with self._lock:
            pool, self._pool = self._pool, None
        if pool is not None:
            pool.shutdown(wait=False, cancel_futures=True)
