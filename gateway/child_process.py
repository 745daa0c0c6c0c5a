"""The gateway's helper processes (the store writer): spawned, and never orphans.

A ``ProcessPoolExecutor`` worker waits on a queue whose both ends it holds, so when its gateway dies
(kill -9, the OOM killer, a crashed container entrypoint) nothing tells it: session 47 found a
background encoder child (tried, not kept) still encoding minutes after its gateway was killed, and
the store writer sat idle on its database connection. Each child asks Linux to kill it with its parent
(``PR_SET_PDEATHSIG``), and exits at once if the parent is already gone. ``spawn``, never ``fork``: the
gateway is a threaded process with a running event loop. As with any spawned child, the parent's main
module is imported again as ``__mp_main__``: ``ventana serve`` is, and a program that embeds the app must
keep its start-up under ``if __name__ == "__main__":``.
"""

from __future__ import annotations

import contextlib
import ctypes
import multiprocessing
import os
import signal
import sys
from concurrent.futures import ProcessPoolExecutor

_PR_SET_PDEATHSIG = 1


def one_child_pool() -> ProcessPoolExecutor:
    """A pool of one spawned child that dies with this process."""
    context = multiprocessing.get_context("spawn")
    return ProcessPoolExecutor(1, mp_context=context, initializer=_child_setup, initargs=(os.getpid(),))


def _child_setup(parent: int) -> None:
    """In the child, first thing: the signal that ends it with its parent (Linux)."""
    if sys.platform.startswith("linux"):  # elsewhere a child ends only when its pool is shut down
        with contextlib.suppress(OSError, AttributeError):
            ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() != parent:  # the parent died before the signal was asked for
        os._exit(0)
