"""The store's writing, done in a child process so it does not compete with requests for the GIL.

Writing a record is CPU work: the canonical JSON and sha256 of every message the request
carries (a 105K-token agent request resends ~300 of them every turn), then SQL. In a
worker thread that work holds the GIL for milliseconds at a time, and every request the
event loop is serving waits behind it (up to the interpreter's 5 ms switch interval per
hand-over). In a child process it runs on another core; the gateway only pickles the
records, which shares the message objects the original and the assembled bodies have in
common.

The child keeps its own engine and ``KnownContent`` (hashes it has committed), so only
unknown content is looked up in the database. Errors cross the process boundary as two
plain exception types, because driver exceptions do not always survive pickling:
``StoreUnavailable`` (the database cannot be reached: spool and retry) and
``RecordsRejected`` (a record the database refused: write one by one).
"""

from __future__ import annotations

import logging
import threading
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from typing import Any

import orjson
from sqlalchemy import Engine
from sqlalchemy.exc import DBAPIError, DisconnectionError, InterfaceError, OperationalError, SQLAlchemyError
from sqlalchemy.exc import TimeoutError as PoolTimeout

from gateway.child_process import one_child_pool
from gateway.store.record import RequestRecord

log = logging.getLogger("ventana.store")

#: Errors one bad record can cause (a value the database or JSON cannot hold).
RECORD_ERRORS = (SQLAlchemyError, TypeError, ValueError)


class StoreUnavailable(Exception):
    """The database could not be reached; the batch was not written."""


def unreachable(exc: BaseException) -> bool:
    """Whether a database error means "cannot reach it now" (spool and retry), not "refused this record".

    ``SQLAlchemyError`` covers both: a refused connection, a cut one, an exhausted pool are
    ``OperationalError``/``InterfaceError``/``DisconnectionError``/``TimeoutError`` or carry
    ``connection_invalidated``; a value the database cannot hold is a ``DataError``, an
    ``IntegrityError``, a ``ProgrammingError``. Treating the first kind as the second set every
    spooled record aside as refused when a replay met a database still down (issue 35)."""
    if isinstance(exc, StoreUnavailable | OperationalError | InterfaceError | DisconnectionError | PoolTimeout):
        return True
    return isinstance(exc, DBAPIError) and bool(exc.connection_invalidated)


class RecordsRejected(Exception):
    """The database refused the batch (a record it cannot hold); nothing of it was written."""


# --- in the child ---------------------------------------------------------------------------

_engines: dict[str, Engine] = {}
_known: dict[str, Any] = {}


def _engine(database_url: str) -> Engine:
    from gateway.store.engine import make_engine

    if database_url not in _engines:
        _engines[database_url] = make_engine(database_url)
    return _engines[database_url]


def for_the_wire(record: RequestRecord) -> RequestRecord:
    """``record`` as sent to the child: its bodies as the JSON bytes it carries, not as dicts.

    Pickling a 105K-token body (twice: original and assembled) costs ~0.5 ms of the gateway's
    GIL; bytes pickle as one copy, and the child parses them on its own core.
    """
    if record.original_json is None or record.assembled_json is None:
        return record
    return record.changed(original={}, assembled={})


def _restore(record: RequestRecord) -> RequestRecord:
    if record.original_json is None or record.assembled_json is None or record.original:
        return record
    original = orjson.loads(record.original_json)
    same = record.assembled_json == record.original_json
    assembled = original if same else orjson.loads(record.assembled_json)
    return record.changed(original=original, assembled=assembled, original_json=None, assembled_json=None)


def write_batch(database_url: str, records: list[RequestRecord]) -> int:
    """Write ``records`` in one transaction (runs in the child); return how many rows were added."""
    from gateway.store.writer import KnownContent, write_records

    records = [_restore(r) for r in records]
    known = _known.setdefault(database_url, KnownContent())
    try:
        with _engine(database_url).begin() as conn:
            written = write_records(conn, records, known=known)
    except RECORD_ERRORS as exc:
        if unreachable(exc):
            raise StoreUnavailable(f"{type(exc).__name__}: {str(exc)[:300]}") from None
        raise RecordsRejected(f"{type(exc).__name__}: {str(exc)[:300]}") from None
    known.update(written.content)  # committed: safe to skip these look-ups from now on
    return written.requests


def prune_store(database_url: str, retention_days: int) -> Any:
    """Retention pass (runs in the child, whose content memo it must clear: content may go)."""
    from gateway.store.retention import prune

    known = _known.get(database_url)
    if known is not None:
        known.clear()
    try:
        return prune(_engine(database_url), retention_days=retention_days)
    except OperationalError as exc:
        raise StoreUnavailable(f"{type(exc).__name__}: {str(exc)[:300]}") from None


def _ready() -> bool:
    """Imports the writer's modules, so the first real batch does not pay for it."""
    import gateway.store.writer  # noqa: F401

    return True


# --- in the gateway ---------------------------------------------------------------------------


class WriterProcess:
    """One child process that writes batches; restarted once if it dies (killed, out of memory)."""

    def __init__(self) -> None:
        self._pool: ProcessPoolExecutor | None = None
        self._lock = threading.Lock()

    def start(self) -> None:
        """Start the child in the background (``spawn``: no fork of a threaded, running event loop)."""
        with self._lock:
            if self._pool is None:
                self._pool = one_child_pool()  # spawned, and killed with the gateway
                self._pool.submit(_ready)

    def call(self, fn: Any, *args: Any) -> Any:
        """Run ``fn(*args)`` in the child and wait (call from a worker thread, never the event loop)."""
        for attempt in (1, 2):
            self.start()
            assert self._pool is not None
            try:
                future: Future[Any] = self._pool.submit(fn, *args)
                return future.result()
            except BrokenProcessPool:
                log.error("store writer process died; starting a new one (attempt %d)", attempt)
                with self._lock:
                    self._pool = None
        raise StoreUnavailable("the store writer process keeps dying")

    def close(self) -> None:
        with self._lock:
            if self._pool is not None:
                self._pool.shutdown(wait=True, cancel_futures=False)
                self._pool = None
