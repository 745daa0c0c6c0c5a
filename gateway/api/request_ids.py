"""The id every answer carries (``x-ventana-request-id``), named once for every door and the error handlers.

A client holding it finds the request in ``ventana logs`` and ``/ui``: the record, a refusal and a compaction the
gateway answered itself are all stored under it.
"""

from __future__ import annotations

import os
import threading

REQUEST_ID_HEADER = "x-ventana-request-id"
#: Random bytes per id, and ids drawn from one read of the kernel's generator.
ID_BYTES = 10
IDS_PER_READ = 256


class _Pool:
    """Ids cut from one ``os.urandom`` read: the same randomness as a read per id, one syscall per
    ``IDS_PER_READ`` requests instead of one each (a syscall after the loop sat idle is ~15 us on a VM
    whose idle vCPU halts). A forked child starts with none of its parent's bytes."""

    def __init__(self) -> None:
        self._lock = threading.Lock()  # one pool for every thread of the process
        self._hex = ""
        self._at = 0

    def take(self) -> str:
        with self._lock:
            if self._at >= len(self._hex):
                self._hex, self._at = os.urandom(ID_BYTES * IDS_PER_READ).hex(), 0
            start = self._at
            self._at = start + 2 * ID_BYTES
            return self._hex[start : self._at]

    def forget(self) -> None:
        self._lock = threading.Lock()
        self._hex, self._at = "", 0


_POOL = _Pool()
os.register_at_fork(after_in_child=_POOL.forget)


def new_request_id() -> str:
    """A fresh id: 80 random bits (``uuid4`` is the same randomness, slower)."""
    return "req-" + _POOL.take()
