"""A Recorder that appends each record as one JSON line: the "nothing lost" ledger until the SQL store lands.

The hardening checks and the load benchmark count what reached the Recorder seam; this is
the simplest durable implementation of that seam that another process can read. It is
not the store: it writes synchronously on the event loop (one short line per request,
flushed), keeps no index and never rotates. When ``SqlRecorder`` lands, the same checks
run against it (``tests/store/test_nothing_lost.py`` is parametrised over recorders).

Keys never reach it: a ``RequestRecord`` holds the caller's hash, not the key.
"""

from __future__ import annotations

from pathlib import Path
from typing import IO, Any

import orjson

from gateway.store.record import Forwarded, RequestRecord, record_dict


def record_to_dict(record: RequestRecord) -> dict[str, Any]:
    """A JSON-ready dict of every field but the transient bytes (``usage`` becomes a nested object)."""
    return record_dict(record)


class JsonlRecorder:
    wants_json = False
    stored = False  # a log file, not the database memory's archive sits beside

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self._fh: IO[bytes] | None = None
        self.written = 0

    def record(self, record: RequestRecord) -> None:
        if self._fh is None:
            self._fh = self.path.open("ab")
        self._fh.write(orjson.dumps(record_to_dict(record)) + b"\n")
        self._fh.flush()
        self.written += 1

    def look_ahead(self, sent: Forwarded) -> None:
        return None  # nothing is journaled

    def journal(self, record: RequestRecord) -> None:
        return None  # ``record`` writes the line before the next request is read

    async def room(self) -> None:
        return None  # records are written synchronously

    async def start(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._fh = self.path.open("ab")

    async def close(self) -> None:
        if self._fh is not None:
            self._fh.close()
            self._fh = None

    def ready(self) -> bool:
        return True


def read_records(path: str | Path) -> list[dict[str, Any]]:
    """Every record a JsonlRecorder wrote to ``path`` (empty when nothing was written).

    A line without its newline is one the recorder is still writing (a long record reaches the file
    in several writes), so it is left for the next read instead of failing this one.
    """
    p = Path(path)
    if not p.exists():
        return []
    data = p.read_bytes()
    complete = data[: data.rfind(b"\n") + 1]
    return [orjson.loads(line) for line in complete.splitlines() if line.strip()]
