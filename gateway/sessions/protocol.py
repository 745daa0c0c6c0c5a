"""The session-state seam: load a conversation's state before assembly, save it after."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Protocol, TypeVar

from gateway.assembly.context import SessionState

T = TypeVar("T")


class SessionStore(Protocol):
    """Backends: in-process (one gateway) or shared (replicas behind a load balancer).

    ``save(state, base)`` names the state it was made from: when another turn saved the
    session meanwhile (this worker, another worker, another replica), the two merge field by
    field (``merge.py``) instead of the later overwriting the earlier. ``update`` applies a
    change to whatever is stored, atomically (a compare-and-set on the row's version in the
    shared store). Finished checkpoints are also stored append-only through
    ``claim``/``finish``, and read back with ``claimed``.

    ``claim``, ``finish``, ``result``, ``claimed``, ``remembered``, ``remember`` and ``newest``
    block when ``blocking`` is true (a
    database round trip in the shared backend): call them through ``store_call``, which
    moves them off the event loop only then.
    """

    #: Whether claim/finish/result/claimed do I/O. An in-process dict answers in a microsecond,
    #: far less than a hop to a worker thread (which under load waits for the GIL).
    blocking: bool

    async def load(self, session_id: str) -> SessionState: ...

    async def save(self, state: SessionState, base: SessionState | None = None) -> None: ...

    async def update(self, session_id: str, change: Callable[[SessionState], SessionState]) -> SessionState:
        """Apply ``change`` to the stored state atomically; the state stored."""
        ...

    def remembered(self, keys: list[str]) -> dict[str, str]:
        """Values ``remember`` stored under these keys, by any process sharing this store."""
        ...

    def remember(self, values: dict[str, str]) -> None:
        """Store values under keys, first writer wins (append-only, as claims)."""
        ...

    def newest(self, prefix: str) -> str | None:
        """The value remembered under the greatest key starting with ``prefix`` (None: none)."""
        ...

    def claim(self, key: str) -> bool:
        """True for exactly one caller per key across every process sharing this store."""
        ...

    def finish(self, key: str, result: str) -> None:
        """Attach the winner's finished work to its claim (written once; later calls are ignored)."""
        ...

    def result(self, key: str) -> str | None:
        """The finished work of a claim; None while it is in flight or was never claimed."""
        ...

    def claimed(self, prefix: str) -> dict[str, str | None]:
        """Every claim whose key starts with ``prefix``, with its result (None while in flight)."""
        ...

    async def read_claims(self, prefix: str) -> dict[str, str | None]:
        """``claimed`` from the event loop: the shared store batches concurrent reads into one hop."""
        ...

    async def close(self) -> None: ...


async def store_call(store: SessionStore, call: Callable[..., T], *args: object) -> T:
    """Run one of ``store``'s claim methods: inline for an in-process store, in a thread otherwise."""
    if store.blocking:
        return await asyncio.to_thread(call, *args)
    return call(*args)
