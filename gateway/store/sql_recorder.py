"""The production Recorder: a bounded queue in front of a batched SQL writer, with a spool.

``record()`` is called on the request path and never waits: it puts the record on a
bounded thread-safe queue (a full queue drops the record and counts it, rather than slow
every request down to the database's pace). One writer thread of its own takes batches off
the queue and writes each in one transaction: itself by default; with ``writer="process"``
through a child process (``writer_process``), so hashing and SQL do not hold the gateway's
GIL while it serves requests. The thread never calls back into the event loop per batch
(an ``asyncio.to_thread`` hop per batch cost the loop a wake-up and the thread GIL time in
``call_soon_threadsafe`` for every request); it does only when requests wait for it
(``room``). When the database cannot
be reached, batches are appended to the local spool file instead; every ``retry_s`` the
writer tries the database again and, once it answers, replays the spool oldest first.
``close()`` drains the queue and writes (or spools) everything before returning.

The queue is memory: a process killed before its writer committed would lose what it holds. So
each answered request's record is first appended to this process's journal (``journal``, called
before the client has the end of its answer; ``store/journal.py``); the writer settles entries
once their records are committed or spooled, and ``start`` replays the journals of processes
that died before serving again.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import queue
import threading
import time
from collections.abc import Sequence
from typing import Any, Literal

from sqlalchemy import Engine
from sqlalchemy.exc import OperationalError, SQLAlchemyError

from gateway import metrics
from gateway.config import Settings
from gateway.object_memo import WeakMemo
from gateway.store.engine import make_engine, normalise_url, safe_url, sqlite_path
from gateway.store.journal import Journal, orphans
from gateway.store.record import Forwarded, RequestRecord
from gateway.store.redact import Redactor
from gateway.store.retention import prune
from gateway.store.spool import Spool, record_parts, record_tail, sent_head
from gateway.store.writer import KnownContent, write_records
from gateway.store.writer_process import (
    RECORD_ERRORS,
    RecordsRejected,
    StoreUnavailable,
    WriterProcess,
    for_the_wire,
    prune_store,
    unreachable,
    write_batch,
)

log = logging.getLogger("ventana.store")

DEFAULT_RETRY_S = 2.0
#: How often the writer thread looks at the queue: at a low request rate one transaction then
#: carries several records instead of one commit per request.
LINGER_S = 0.02
DEFAULT_PRUNE_EVERY_S = 3600.0
#: Share of ``queue_size`` from which new requests wait for the writer (see ``room``), and the
#: share it must drain to before they go on: bounded memory without dropping records.
BACKPRESSURE_AT = 0.2
BACKPRESSURE_UNTIL = 0.1
_STOP = object()
#: Errors one bad record can cause (a value the database or JSON cannot hold); the rest of its batch is still written.
_RECORD_ERRORS = (*RECORD_ERRORS, RecordsRejected)
#: Errors that mean the database cannot be reached: spool the batch and retry later. ``_commit`` turns
#: every such SQLAlchemy error into StoreUnavailable (``writer_process.unreachable``), so a record error
#: handler, which catches SQLAlchemyError, never sees one.
_DOWN_ERRORS = (OperationalError, StoreUnavailable)


class _KeepJournals(Exception):
    """The journaled records of a dead process could not all be made safe: leave its files in place."""


class SqlRecorder:
    """Persist RequestRecords to ``database_url`` off the request path (see the module doc)."""

    stored = True  # the database memory's archive lives in

    def __init__(
        self,
        *,
        database_url: str,
        queue_size: int = 10_000,
        batch_size: int = 200,
        spool_path: str = "ventana-spool.jsonl",
        redact: Sequence[str] = (),
        redact_secrets: bool = False,
        retention_days: int | None = None,
        retry_s: float = DEFAULT_RETRY_S,
        prune_every_s: float = DEFAULT_PRUNE_EVERY_S,
        writer: Literal["process", "thread"] = "thread",
        journal: bool = True,
        journal_fsync: bool = False,
    ) -> None:
        self.database_url = database_url
        self.batch_size = batch_size
        self.retention_days = retention_days
        self.retry_s = retry_s
        self.prune_every_s = prune_every_s
        self.spool = Spool(spool_path)
        url = normalise_url(database_url)
        postgres = url.get_backend_name() == "postgresql"
        self._sqlite_file = sqlite_path(url)  # watched: a deleted file would take writes silently
        self.redactor = Redactor(redact, secrets=redact_secrets, nul_free=postgres)
        self._journal = Journal(spool_path, fsync=journal_fsync) if journal else None
        # a forwarded request -> the start of its journal line, made while the provider works (``look_ahead``);
        # held weakly, as the redactor's verdicts are: the line holds the request's bodies
        self._heads: WeakMemo[Forwarded, list[bytes]] = WeakMemo()
        self.rejected = Spool(f"{spool_path}.rejected")  # spooled records the database still refused
        self.written = self.spooled = self.dropped = 0
        self.database_up = True
        self.queue_size = queue_size
        self._queue: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._engine: Engine | None = None
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._next_retry = 0.0
        self._next_prune = 0.0
        self._spool_broken = False
        self._lost: set[str] = set()  # request ids of the batch being written that were dropped
        self._known = KnownContent()
        self._process = WriterProcess() if writer == "process" else None
        self.backpressure_at = max(1, int(queue_size * BACKPRESSURE_AT))
        self._resume_at = int(queue_size * BACKPRESSURE_UNTIL)
        self._drained = asyncio.Event()
        self._drained.set()
        self.waited = 0

    @classmethod
    def from_settings(cls, settings: Settings) -> SqlRecorder:
        store = settings.store
        return cls(
            database_url=settings.database_url,
            queue_size=store.queue_size,
            batch_size=store.batch_size,
            spool_path=store.spool_path,
            redact=store.redact,
            redact_secrets=store.redact_secrets,
            retention_days=store.retention_days,
            writer=store.writer,
            journal=store.journal,
            journal_fsync=store.journal_fsync,
        )

    @property
    def wants_json(self) -> bool:
        """Whether records should carry their bodies' JSON bytes: the child process parses them, the
        journal writes them as they are instead of encoding the bodies again."""
        return self._process is not None or self._journal is not None

    def __repr__(self) -> str:
        return (
            f"SqlRecorder(database_url={safe_url(self.database_url)!r}, batch_size={self.batch_size}, "
            f"spool_path={str(self.spool.path)!r}, retention_days={self.retention_days}, "
            f"writer={'process' if self._process else 'thread'!r})"
        )

    def record(self, record: RequestRecord) -> None:
        """Queue ``record`` for writing; never blocks. A full queue drops it (counted, logged).

        The bodies' JSON bytes a record carries (``Forwarded.original_json``, ``assembled_json``) were for
        the journal, already written; only a writer process reads them again. Queued with them, a 105K-token
        request's ~0.9 MB stayed alive until the writer's commit, under a queue of them at 32 clients, and
        the next requests' buffers came from fresh pages. Dropped here, with the redactor's verdicts held
        weakly and the journal's files reused: 122 -> 183 req/s and +6.27 -> +2.87 ms at 105K tokens
        (``benchmarks.overhead --checkout``, RESULTS, session 42)."""
        if self._process is None and (record.original_json is not None or record.assembled_json is not None):
            stripped = record.changed(original_json=None, assembled_json=None)
            self.redactor.same_bodies(record.sent, stripped.sent)
            record = stripped
        if self._queue.qsize() >= self.queue_size:
            self.dropped += 1
            metrics.STORE_DROPPED.inc()
            log.warning("store queue full (%d records): dropped request %s", self.queue_size, record.request_id)
        else:
            self._queue.put(record)
        metrics.STORE_QUEUE_DEPTH.set(self._queue.qsize())

    def look_ahead(self, sent: Forwarded) -> None:
        """Work the record of ``sent`` will need, done while the provider answers: the redactor's verdict on
        its bodies (``Redactor.look_ahead``) and the part of its journal line the request decides
        (``spool.sent_head``), encoded and written (``Journal.begin``), so the journal before the answer
        encodes and writes only what the answer decides, and a kill before the answer still leaves the
        request in the journal. Never raises: what fails here is done again, or fails again, when the
        record is journaled or written."""
        try:
            self.redactor.look_ahead(sent)
            if self._journal is not None:
                head = sent_head(self.redactor.sent(sent))
                self._heads.put(sent, head)
                self._journal.begin(sent.request_id, head)
        except Exception:
            log.exception("store: looking ahead at request %s failed", sent.request_id)

    def journal(self, record: RequestRecord) -> None:
        """Append ``record`` (redacted) to this process's journal; called before the client has the end
        of its answer, so a kill after the answer cannot lose it. Never raises: a journal that cannot
        be written is logged and the record goes on through the queue as before."""
        if self._journal is None:
            return
        try:
            head = self._heads.pop(record.sent)
            redacted = self.redactor.record(record)
            if head is not None and self._journal.finish(record.request_id, record_tail(redacted)):
                return  # the request's part went ahead (``look_ahead``): the answer's part completes its line
            # ``head`` masked the bodies as ``record`` below masks them: the line is the same either way
            self._journal.append(record.request_id, record_parts(redacted, head))
        except Exception:
            log.exception("store: request %s could not be journaled", record.request_id)

    async def room(self) -> None:
        """Wait while the queue holds ``backpressure_at`` records or more, until it drains to half that.

        A writer that cannot keep up (a saturated gateway, a slow database) would otherwise fill
        the queue: thousands of parsed requests in memory, then records dropped. Waiting here
        slows the clients down to the store's pace instead. A writer that is not running (the
        recorder not started, or stopped) is not waited for.
        """
        if self._queue.qsize() < self.backpressure_at or not self._running():
            return
        if self._drained.is_set():
            self._drained.clear()
            log.warning("store writer %d records behind: new requests wait for it", self._queue.qsize())
        self.waited += 1
        metrics.STORE_BACKPRESSURE.inc()
        await self._drained.wait()

    def _check_drained(self) -> None:
        """Runs in the writer thread: let waiting requests go on once the queue has drained."""
        if not self._drained.is_set() and self._queue.qsize() <= self._resume_at and self._loop is not None:
            with contextlib.suppress(RuntimeError):  # the loop closed under a writer nobody closed
                self._loop.call_soon_threadsafe(self._drained.set)

    def _running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    async def start(self) -> None:
        if self._thread is None:
            if self._process is not None:
                self._process.start()
            else:
                self._engine = make_engine(self.database_url)
            if self._journal is not None:
                await asyncio.to_thread(self._recover_journals)
                try:
                    self._journal.open()
                except OSError:
                    # Beside a spool that cannot be written (its folder is a file, a read-only disk) the
                    # journal cannot be either: serve without it, as before it existed, and say so.
                    log.exception("store: no journal beside %s; records are not journaled", self.spool.path)
                    self._journal = None
            self._loop = asyncio.get_running_loop()
            self._thread = threading.Thread(target=self._run, name="ventana-store-writer", daemon=True)
            self._thread.start()

    async def close(self) -> None:
        """Write (or spool) everything queued, then stop the writer."""
        if self._thread is None:
            return
        self._queue.put(_STOP)
        await asyncio.to_thread(self._thread.join)
        self._thread = None
        self._drained.set()  # nobody waits for a writer that has stopped
        if self._process is not None:
            await asyncio.to_thread(self._process.close)
        if self._engine is not None:
            self._engine.dispose()
        if self._journal is not None:
            self._journal.close()
        metrics.STORE_QUEUE_DEPTH.set(0)

    def ready(self) -> bool:
        """True while records are safe: the writer runs and the database or the spool takes them."""
        return self._running() and not self._spool_broken and not self._file_missing()

    def _file_missing(self) -> bool:
        """An SQLite file deleted under a running gateway: its open connections would keep writing to
        the unlinked file, and every record after that would be lost while looking stored."""
        return self._sqlite_file is not None and not self._sqlite_file.exists()

    def status(self) -> dict[str, Any]:
        database = "missing" if self._file_missing() else "up" if self.database_up else "unreachable"
        return {
            "database": database,
            "queue_depth": self._queue.qsize(),
            "written": self.written,
            "spooled": self.spooled,
            "dropped": self.dropped,
            "spool_pending": self.spool.pending(),
            "journal_pending": 0 if self._journal is None else self._journal.pending(),
        }

    def _run(self) -> None:
        """The writer thread: batches until ``close`` queues the stop, then the last batch."""
        try:
            stopping = False
            while not stopping:
                batch, stopping = self._next_batch()
                metrics.STORE_QUEUE_DEPTH.set(self._queue.qsize())
                self._check_drained()
                if batch or stopping or (self.spool.pending() and time.monotonic() >= self._next_retry):
                    self._write(batch, stopping)
                if self.retention_days and time.monotonic() >= self._next_prune and not stopping:
                    self._next_prune = time.monotonic() + self.prune_every_s
                    self._prune()
        except BaseException:
            log.exception("store writer stopped by an unexpected error; the gateway reports not ready")
            raise

    def _next_batch(self) -> tuple[list[RequestRecord], bool]:
        """Up to a batch of queued records, looking every ``LINGER_S`` for up to ``retry_s``.

        The writer looks rather than waits on the queue: a thread woken by ``record()`` takes the
        GIL from the request that is just being answered (+0.05-0.15 ms median, +0.3 ms p90 to the work
        after the put in a two-thread check here); a look every 20 ms mostly finds the loop idle."""
        deadline = time.monotonic() + self.retry_s
        while True:
            batch: list[RequestRecord] = []
            while len(batch) < self.batch_size:
                try:
                    item = self._queue.get_nowait()
                except queue.Empty:
                    break
                if item is _STOP:
                    return batch, True
                batch.append(item)
            if batch or time.monotonic() >= deadline:
                return batch, False
            time.sleep(LINGER_S)

    def _write(self, batch: list[RequestRecord], final: bool = False) -> None:
        """Runs in the writer thread: write the spool (if any) then the batch, or spool the batch.

        While the database is down, batches go straight to the spool until the next retry
        time; the ``final`` batch at shutdown always tries the database once more.
        """
        records = [self.redactor.record(r) for r in batch]
        try:
            self._write_or_spool(records, final)
        finally:
            self._settle(records)

    def _settle(self, records: list[RequestRecord]) -> None:
        """Let the journal drop the entries of records now committed, spooled or set aside (not dropped)."""
        if self._journal is None or not records:
            return
        lost = self._lost
        try:
            self._journal.settled(r.request_id for r in records if r.request_id not in lost)
        except OSError:
            log.exception("store: the journal could not be trimmed")
        lost.clear()

    def _write_or_spool(self, records: list[RequestRecord], final: bool) -> None:
        # With a broken spool, waiting for the retry time would drop the batch: try the database now.
        if not self.database_up and not final and not self._spool_broken and time.monotonic() < self._next_retry:
            self._to_spool(records)
            return
        if self._file_missing():
            if self._engine is not None:
                self._engine.dispose()  # connections to the deleted file; new ones open whatever is there next
            self._database_down(StoreUnavailable(f"the database file {self._sqlite_file} is missing"))
            self._to_spool(records)
            return
        try:
            self._replay_spool()
            self._commit(records)
        except _DOWN_ERRORS as exc:
            self._database_down(exc)
            self._to_spool(records)
            return
        except _RECORD_ERRORS:
            log.exception("store batch of %d records rejected; writing them one by one", len(records))
            try:
                self._write_one_by_one(records)
            except _DOWN_ERRORS as exc:  # the database went away in the middle: the rest waits in the spool
                self._database_down(exc)
                self._to_spool(records)  # those already written are written again: the writer is idempotent
                return
        if not self.database_up:
            log.warning("store database %s is back", safe_url(self.database_url))
        self.database_up = True
        self._spool_broken = False  # written to the database: records are safe again

    def _commit(self, records: list[RequestRecord]) -> None:
        """Write ``records`` in one transaction; a database that cannot be reached raises StoreUnavailable,
        one that refuses a record raises one of ``_RECORD_ERRORS``."""
        if not records:
            return
        if self._process is not None:
            self._process.call(write_batch, self.database_url, [for_the_wire(r) for r in records])
        else:
            assert self._engine is not None
            try:
                with self._engine.begin() as conn:
                    written = write_records(conn, records, known=self._known)
            except SQLAlchemyError as exc:
                if unreachable(exc):
                    raise StoreUnavailable(f"{type(exc).__name__}: {str(exc)[:300]}") from exc
                raise
            self._known.update(written.content)  # committed: safe to skip these lookups from now on
        self.written += len(records)
        metrics.STORE_WRITTEN.inc(len(records))

    def _replay_spool(self) -> None:
        """Write the spool oldest first. A database still (or again) unreachable raises StoreUnavailable
        and leaves the whole spool in place for the next retry; only records the database refuses for
        their content are set aside (``<spool>.rejected``), each named in the log."""
        if not self.spool.pending():
            return
        set_aside = 0
        with self.spool.take() as spooled:
            spooled = [self.redactor.record(r) for r in spooled]  # spooled by an older gateway, maybe
            for i in range(0, len(spooled), self.batch_size):
                batch = spooled[i : i + self.batch_size]
                try:
                    self._commit(batch)
                except _RECORD_ERRORS:  # one refused record must not hold back every record after it
                    log.exception("store: a spooled batch was refused; writing it one by one")
                    set_aside += self._write_one_by_one(batch)
        log.warning(
            "store: replayed %d spooled records into the database%s",
            len(spooled) - set_aside,
            f"; {set_aside} refused for their content, set aside in {self.rejected.path}" if set_aside else "",
        )

    def _write_one_by_one(self, records: list[RequestRecord]) -> int:
        """Write each record alone; set aside (``<spool>.rejected``) those the database refuses for their
        content and return how many. A database that cannot be reached raises StoreUnavailable."""
        refused = 0
        for record in records:
            try:
                self._commit([record])
            except _RECORD_ERRORS:
                refused += 1
                self.dropped += 1
                metrics.STORE_DROPPED.inc()
                try:
                    self.rejected.append([record])
                except OSError:
                    self._lost.add(record.request_id)
                    log.exception("store: request %s refused and cannot be set aside; lost", record.request_id)
                    continue
                log.exception(
                    "store: request %s refused by the database for its content; set aside in %s",
                    record.request_id,
                    self.rejected.path,
                )
        return refused

    def _recover_journals(self) -> None:
        """Before serving: write (or spool) the records journaled by gateway processes that died
        before their writer committed them. The writer skips request ids already stored, so a
        record committed before the kill is not stored twice."""
        try:
            with orphans(self.spool.path) as records:
                for i in range(0, len(records), self.batch_size):
                    batch = [self.redactor.record(r) for r in records[i : i + self.batch_size]]
                    self._write_or_spool(batch, True)
                if self._lost:  # neither written nor spooled (a spool that cannot be written)
                    raise _KeepJournals(len(self._lost))
        except _KeepJournals as kept:
            log.error(
                "store: %d journaled records could be neither written nor spooled; kept for the next start",
                kept.args[0],
            )
            return
        finally:
            self._lost.clear()
        if records:
            log.warning(
                "store: %d records journaled by a gateway that stopped before committing them replayed", len(records)
            )

    def _database_down(self, exc: Exception) -> None:
        if self.database_up:
            log.warning(
                "store database %s unreachable (%s): spooling to %s",
                safe_url(self.database_url),
                exc.__class__.__name__,
                self.spool.path,
            )
        self.database_up = False
        self._next_retry = time.monotonic() + self.retry_s

    def _to_spool(self, records: list[RequestRecord]) -> None:
        if not records:
            return
        try:
            self.spool.append(records)
        except OSError:
            self._spool_broken = True
            self._lost.update(r.request_id for r in records)  # kept in the journal: the only copy left
            self.dropped += len(records)
            metrics.STORE_DROPPED.inc(len(records))
            log.exception("store: cannot spool %d records to %s; dropped", len(records), self.spool.path)
            return
        self._spool_broken = False
        self.spooled += len(records)
        metrics.STORE_SPOOLED.inc(len(records))

    def _prune(self) -> None:
        assert self.retention_days is not None
        try:
            if self._process is not None:
                self._process.call(prune_store, self.database_url, self.retention_days)
                return
            assert self._engine is not None
            self._known.clear()  # the pass may delete content this writer remembers as stored
            prune(self._engine, retention_days=self.retention_days)
        except (SQLAlchemyError, StoreUnavailable):
            log.exception("store: retention pass failed; will try again in %.0f s", self.prune_every_s)
