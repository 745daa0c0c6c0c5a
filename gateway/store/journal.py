"""A write-ahead journal of request records: on disk before the client has the end of its answer.

The SQL recorder's queue lives in memory: a gateway killed (``kill -9``, the OOM killer) after
answering loses the records its writer had not committed yet (19, 3 and 6 of a burst of 40 in
``benchmarks.kill9_loss``, issue 35). So each answered request's record is appended here first,
as one line in the spool's format (``spool.record_parts``), by one ``os.writev`` on an ``O_APPEND``
descriptor: the page cache is the kernel's, so the line outlives the process. Without
``fsync`` (``store.journal_fsync``, off by default) it does not outlive a power loss.

Each gateway process has a file of its own (``<spool>.journal-<pid>-<random>``), locked
(``flock``) while the process lives. Once the writer has committed (or spooled) a request's
record, its entry is settled; a file whose entries are all settled is emptied (or, when it has
been rotated out for growing past ``ROTATE_BYTES``, deleted), so it stays small. At start-up a
gateway replays the files no living process holds (``orphans``): the writer is idempotent by
request id, so a record committed before the kill is not stored twice.
"""

from __future__ import annotations

import fcntl
import os
import secrets
import threading
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager, suppress
from pathlib import Path

import orjson

from gateway.store.engine import create_private
from gateway.store.record import RequestRecord
from gateway.store.spool import record_from_json

#: A file past this size is closed for new entries and a new one opened; the old one is deleted
#: once its last entry is settled (under steady traffic some entry is always open, so a file
#: emptied only when everything is settled could grow without end).
ROTATE_BYTES = 16 * 1024 * 1024


def journal_glob(spool_path: str | os.PathLike[str]) -> tuple[Path, str]:
    """The directory and file pattern of every process's journal beside ``spool_path``."""
    spool = Path(spool_path)
    return spool.parent, f"{spool.name}.journal-*"


class _File:
    """One journal file, open for appending and locked by this process."""

    def __init__(self, path: Path) -> None:
        create_private(path)  # it holds prompts and answers, like the database
        self.path = path
        self.fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CLOEXEC)
        fcntl.flock(self.fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # new and uniquely named: never held by another
        self.size = 0
        self.open = 0  # entries not settled yet

    def close(self, *, delete: bool) -> None:
        if delete:
            with suppress(FileNotFoundError):
                self.path.unlink()
        os.close(self.fd)  # releases the lock: after the unlink, so no other process replays a live file


class Journal:
    """This process's journal: ``append`` on the request path, ``settled`` from the writer thread."""

    def __init__(self, spool_path: str | os.PathLike[str], *, fsync: bool = False) -> None:
        self.directory, self._pattern = journal_glob(spool_path)
        self._stem = self._pattern[:-1]
        self.fsync = fsync
        self._lock = threading.Lock()
        self._current: _File | None = None
        self._rotated: list[_File] = []
        self._where: dict[str, _File] = {}  # request id -> the file holding its open entry

    def open(self) -> None:
        with self._lock:
            if self._current is None:
                self._current = self._new_file()

    def _new_file(self) -> _File:
        return _File(self.directory / f"{self._stem}{os.getpid()}-{secrets.token_hex(4)}")

    @property
    def path(self) -> Path | None:
        return None if self._current is None else self._current.path

    def append(self, request_id: str, line: bytes | Sequence[bytes]) -> None:
        """Write one serialised record (ending in a newline), whole or in the pieces of
        ``spool.record_parts``, with one ``os.writev``; called before the answer ends."""
        parts = [line] if isinstance(line, bytes) else line
        with self._lock:
            file = self._current
            if file is None:
                return
            written = _write_all(file.fd, parts)
            if self.fsync:
                os.fsync(file.fd)
            file.size += written
            if request_id not in self._where:
                file.open += 1
                self._where[request_id] = file

    def settled(self, request_ids: Iterable[str]) -> None:
        """These requests' records are committed (or spooled, fsynced): their entries may go."""
        with self._lock:
            for request_id in request_ids:
                file = self._where.pop(request_id, None)
                if file is not None:
                    self._settle(request_id, file)
            current = self._current
            if current is not None and current.size >= ROTATE_BYTES and current.open:
                self._rotated.append(current)
                self._current = self._new_file()

    def _settle(self, request_id: str, file: _File) -> None:
        file.open -= 1
        if file.open:
            return
        if file is self._current:
            if file.size:
                os.ftruncate(file.fd, 0)  # appends go on at the new end (O_APPEND)
                file.size = 0
        else:
            self._rotated.remove(file)
            file.close(delete=True)

    def pending(self) -> int:
        """Entries not settled yet."""
        return len(self._where)

    def close(self) -> None:
        """Stop journaling; the files are deleted only if every entry was settled (else the next start replays them)."""
        with self._lock:
            for file in (*self._rotated, *([self._current] if self._current else [])):
                file.close(delete=not file.open)
            self._rotated, self._current = [], None


def _write_all(fd: int, parts: Sequence[bytes]) -> int:
    """Write ``parts`` in order, as one ``writev`` (a regular file takes it whole; a signal could cut
    a very long one short, and the rest follows); the bytes written."""
    views = [memoryview(p) for p in parts if p]
    total = 0
    while views:
        done = os.writev(fd, views)
        total += done
        while views and done >= len(views[0]):
            done -= len(views[0])
            views.pop(0)
        if done:
            views[0] = views[0][done:]
    return total


@contextmanager
def orphans(spool_path: str | os.PathLike[str]) -> Iterator[list[RequestRecord]]:
    """The records in journal files no living process holds; the files are deleted if the block succeeds.

    Each file is locked before it is read (a process that is still running holds its own, and
    a gateway starting at the same time takes a file or leaves it to the other, never both).
    A line that cannot be parsed (torn by the kill) is skipped, as in the spool; a request
    in two files is replayed once.
    """
    directory, pattern = journal_glob(spool_path)
    held: list[tuple[Path, int]] = []
    records: dict[str, RequestRecord] = {}
    try:
        for path in sorted(directory.glob(pattern)) if directory.exists() else ():
            try:
                fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
            except FileNotFoundError:
                continue  # replayed and deleted by another process meanwhile
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                os.close(fd)
                continue  # a living process's journal
            held.append((path, fd))
            if os.fstat(fd).st_nlink == 0:
                continue  # another process replayed it between our look and our lock
            with os.fdopen(os.dup(fd), "rb") as f:
                data = f.read()
            for line in data.splitlines():
                if line.strip():
                    try:
                        record = record_from_json(line)
                    except (orjson.JSONDecodeError, TypeError, ValueError):
                        continue
                    records[record.request_id] = record
        yield list(records.values())
        for path, _ in held:
            with suppress(FileNotFoundError):
                path.unlink()
    finally:
        for _, fd in held:
            os.close(fd)
