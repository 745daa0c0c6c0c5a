"""The context store: every request's original and assembled context, decisions and usage.

``RequestRecord`` is what the API hands over and ``Recorder`` the seam it hands it to;
``SqlRecorder`` persists records off the request path; ``queries`` is the read API the
CLI, the inspector UI and replay build on. See docs/store.md.
"""

from __future__ import annotations

from gateway.store.queries import (
    RequestSummary,
    SessionSummary,
    StoredRequest,
    get_request,
    list_requests,
    list_sessions,
    messages_of,
)
from gateway.store.record import MemoryRecorder, Recorder, RequestRecord
from gateway.store.sql_recorder import SqlRecorder

__all__ = [
    "MemoryRecorder",
    "Recorder",
    "RequestRecord",
    "RequestSummary",
    "SessionSummary",
    "SqlRecorder",
    "StoredRequest",
    "get_request",
    "list_requests",
    "list_sessions",
    "messages_of",
]
