"""In-process session state: a bounded LRU map, for a single gateway process.

Claims are a dict in the same process (one process: a dict is enough), grouped by the
key's namespace (everything up to its last ``:``) so ``claimed`` of one session's
checkpoints is one lookup, not a scan. Both maps are bounded; the oldest go first.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable
from dataclasses import replace

from gateway.assembly.context import SessionState
from gateway.sessions.merge import merge_states

DEFAULT_MAX_SESSIONS = 50_000
DEFAULT_MAX_CLAIMS = 200_000


def _group(key: str) -> str:
    return key.rpartition(":")[0] + ":"


class MemorySessionStore:
    blocking = False  # claims are a dict in this process

    def __init__(self, *, max_sessions: int = DEFAULT_MAX_SESSIONS, max_claims: int = DEFAULT_MAX_CLAIMS) -> None:
        self._states: OrderedDict[str, SessionState] = OrderedDict()
        self._max = max_sessions
        self._claims: OrderedDict[str, dict[str, str | None]] = OrderedDict()  # group -> key -> result
        self._claim_count = 0
        self._max_claims = max_claims

    async def load(self, session_id: str) -> SessionState:
        state = self._states.get(session_id)
        if state is None:
            return SessionState(session_id=session_id)
        self._states.move_to_end(session_id)
        return state

    async def save(self, state: SessionState, base: SessionState | None = None) -> None:
        """Store ``state``; merged onto a state another turn saved since ``base`` (``merge.py``)."""
        stored = self._states.get(state.session_id)
        if base is not None and stored is not None and stored.version != base.version:
            state = merge_states(base, state, stored)
        self._put(state, stored)

    async def update(self, session_id: str, change: Callable[[SessionState], SessionState]) -> SessionState:
        """Apply ``change`` to the stored state (atomic: nothing else runs on the loop meanwhile)."""
        stored = self._states.get(session_id)
        return self._put(change(stored or SessionState(session_id=session_id)), stored)

    def _put(self, state: SessionState, stored: SessionState | None) -> SessionState:
        state = replace(state, version=(stored.version if stored else 0) + 1)
        self._states[state.session_id] = state
        self._states.move_to_end(state.session_id)
        while len(self._states) > self._max:
            self._states.popitem(last=False)
        return state

    def remembered(self, keys: list[str]) -> dict[str, str]:
        found = {k: self.result(k) for k in keys}
        return {k: v for k, v in found.items() if v is not None}

    def remember(self, values: dict[str, str]) -> None:
        for key, value in values.items():
            if self.claim(key):
                self.finish(key, value)

    def newest(self, prefix: str) -> str | None:
        found = {k: v for k, v in self.claimed(prefix).items() if v is not None}
        return found[max(found)] if found else None

    def claim(self, key: str) -> bool:
        """Return True for the first caller per key."""
        group = self._claims.setdefault(_group(key), {})
        if key in group:
            return False
        group[key] = None
        self._claim_count += 1
        while self._claim_count > self._max_claims and len(self._claims) > 1:
            _, dropped = self._claims.popitem(last=False)
            self._claim_count -= len(dropped)
        return True

    def finish(self, key: str, result: str) -> None:
        group = self._claims.get(_group(key), {})
        if key in group and group[key] is None:
            group[key] = result

    def result(self, key: str) -> str | None:
        return self._claims.get(_group(key), {}).get(key)

    def claimed(self, prefix: str) -> dict[str, str | None]:
        if prefix.endswith(":"):
            return dict(self._claims.get(prefix, {}))
        return {k: v for g in self._claims.values() for k, v in g.items() if k.startswith(prefix)}

    async def read_claims(self, prefix: str) -> dict[str, str | None]:
        return self.claimed(prefix)

    async def close(self) -> None:
        self._states.clear()
