"""In-process session state: a bounded LRU map, for a single gateway process."""

from __future__ import annotations

from collections import OrderedDict

from gateway.assembly.context import SessionState

DEFAULT_MAX_SESSIONS = 50_000


class MemorySessionStore:
    def __init__(self, *, max_sessions: int = DEFAULT_MAX_SESSIONS) -> None:
        self._states: OrderedDict[str, SessionState] = OrderedDict()
        self._max = max_sessions
        self._claims: set[str] = set()

    async def load(self, session_id: str) -> SessionState:
        state = self._states.get(session_id)
        if state is None:
            return SessionState(session_id=session_id)
        self._states.move_to_end(session_id)
        return state

    async def save(self, state: SessionState) -> None:
        self._states[state.session_id] = state
        self._states.move_to_end(state.session_id)
        while len(self._states) > self._max:
            self._states.popitem(last=False)

    def claim(self, key: str) -> bool:
        """Return True for the first caller per key (one process: a set is enough)."""
        if key in self._claims:
            return False
        self._claims.add(key)
        return True

    async def close(self) -> None:
        self._states.clear()
