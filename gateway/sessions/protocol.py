"""The session-state seam: load a conversation's state before assembly, save it after."""

from __future__ import annotations

from typing import Protocol

from gateway.assembly.context import SessionState


class SessionStore(Protocol):
    """Backends: in-process (one gateway) or shared (replicas behind a load balancer).

    ``save`` is last-writer-wins on the whole state; concurrent turns of one session
    are rare and each carries a complete, valid state.
    """

    async def load(self, session_id: str) -> SessionState: ...

    async def save(self, state: SessionState) -> None: ...

    def claim(self, key: str) -> bool:
        """True for exactly one caller per key across every process sharing this store."""
        ...

    async def close(self) -> None: ...
