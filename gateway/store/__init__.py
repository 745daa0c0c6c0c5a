"""The context store: every request's original and assembled context, decisions and usage."""

from __future__ import annotations

from gateway.store.record import MemoryRecorder, Recorder, RequestRecord

__all__ = ["MemoryRecorder", "Recorder", "RequestRecord"]
