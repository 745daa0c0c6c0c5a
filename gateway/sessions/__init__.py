"""Per-conversation state behind one interface, so one process and many replicas behave alike."""

from __future__ import annotations

from gateway.sessions.identify import identify_session
from gateway.sessions.memory import MemorySessionStore
from gateway.sessions.protocol import SessionStore

__all__ = ["MemorySessionStore", "SessionStore", "identify_session"]
