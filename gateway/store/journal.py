"""A write-ahead journal of request records: on disk before the client has the end of its answer.

The SQL recorder's queue lives in memory: a gateway killed (``kill -9``, the OOM killer) after
answering loses the records its writer had not committed yet (19, 3 and 6 of a burst of 40 in
``benchmarks.kill9_loss``, issue 35). So each answered request's record is appended here first,
as one line in the spool's format (``spool.record_parts``, tagged with the file's epoch), by one
``os.pwritev``: the page cache is the kernel's, so the line outlives the process. Without
``fsync`` (``store.journal_fsync``, off by default) it does not outlive a power loss.

Each gateway process has a file of its own (``<spool>.journal-<pid>-<random>``), locked
(``flock``) while the process lives. Once the writer has committed (or spooled) a request's
record, its entry is settled. A file whose entries are all settled is not emptied but reused:
its epoch goes up (a header line at its start says which), and new entries overwrite the old
ones from the start. Emptying and refilling it (``ftruncate``, then appends) gave its pages back
and took fresh ones for every entry: a 105K-token body is ~430 KB of new page cache a request,
and at 32 clients (files rotated past ``ROTATE_BYTES`` and deleted) the write took ~1.3 ms a
request (``benchmarks.profile_gateway``, RESULTS, session 42). A rotated file, once settled, is
kept for the next rotation (``SPARE_FILES`` at most). At start-up a gateway replays the files
no living process holds (``orphans``): the lines of each file's current epoch; the writer is
idempotent by request id, so a record committed before the kill is not stored twice.

A forwarded request's line may come in two parts (``begin``, ``finish``): what the forwarded request
decides (its bodies above all: ~56 KB at 14K tokens, ~0.4 MB at 105K) is written while the provider
works on it, and only what the answer decides before the client has its answer. The answer's part is
still on disk first, so an answered request is never lost; and a request the gateway was killed while
forwarding, lost before, is now replayed as one that got no answer (``INTERRUPTED_STATUS``).
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
from gateway.store.spool import record_from_data

#: A file past this size is closed for new entries and a new one opened; the old one is deleted
#: once its last entry is settled (under steady traffic some entry is always open, so a file
#: emptied only when everything is settled could grow without end).
ROTATE_BYTES = 16 * 1024 * 1024
#: Settled rotated files kept for reuse (their pages stay in the page cache); more are deleted.
SPARE_FILES = 2
#: The member each journal line starts with, and the header line's only one.
EPOCH_KEY = "journal_epoch"
#: A line's first bytes up to its epoch's number: the header's and every entry's.
_EPOCH_PREFIX = b'{"' + EPOCH_KEY.encode() + b'":'
#: The member naming a line that holds part of a record: ``sent`` (``begin``) or ``answer`` (``finish``).
PART_KEY = "journal_part"
#: How a request journaled as forwarded, and never answered, is replayed: the process ended (a kill, a crash)
#: while the provider worked or the answer was on its way, so its client got no answer from it.
INTERRUPTED_STATUS = 502
INTERRUPTED_ERROR = (
    "the gateway stopped (killed or crashed) before this request was answered; replayed from its journal"
)
_SENT_PART = b'"' + PART_KEY.encode() + b'":"sent",'
_ANSWER_PART = b'"' + PART_KEY.encode() + b'":"answer","request_id":'


def journal_glob(spool_path: str | os.PathLike[str]) -> tuple[Path, str]:
    """The directory and file pattern of every process's journal beside ``spool_path``."""
    spool = Path(spool_path)
    return spool.parent, f"{spool.name}.journal-*"


class _File:
    """One journal file, open for writing and locked by this process; written from ``size`` on."""

    def __init__(self, path: Path) -> None:
        create_private(path)  # it holds prompts and answers, like the database
        self.path = path
        self.fd = os.open(path, os.O_WRONLY | os.O_CLOEXEC)
        fcntl.flock(self.fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # new and uniquely named: never held by another
        self.epoch = 0
        self.size = 0  # where the next entry goes: what lies past it is an earlier epoch's
        self.open = 0  # entries not settled yet
        self.restart()

    def restart(self) -> None:
        """A new epoch: its header at the start, the next entry after it (earlier lines no longer count)."""
        self.epoch += 1
        header = _EPOCH_PREFIX + b"%d}\n" % self.epoch
        self.size = _write_all(self.fd, [header], 0)

    def tag(self, part: bytes = b"") -> bytes:
        """What a line's ``{`` becomes: the object's first member names this file's epoch (and the part's
        member follows, for a record in two lines)."""
        return _EPOCH_PREFIX + b"%d," % self.epoch + part

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
        self._spare: list[_File] = []  # rotated files all settled, for the next rotation
        self._where: dict[str, _File] = {}  # request id -> the file holding its open entry
        self._begun: set[str] = set()  # request ids whose sent part is written and whose answer is not

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
        """Write one serialised record (a JSON object ending in a newline), whole or in the pieces of
        ``spool.record_parts``, with one ``os.pwritev``; called before the answer ends."""
        parts = [line] if isinstance(line, bytes) else line
        with self._lock:
            self._begun.discard(request_id)  # a whole line replaces a begun one (the replay prefers it)
            self._write(request_id, b"", [memoryview(parts[0])[1:], *parts[1:]])  # "{" -> the tag

    def begin(self, request_id: str, head: Sequence[bytes]) -> None:
        """Write the part of a record its forwarded request decides (``spool.sent_head``: a line's start, no
        closing brace) as a line of its own, while the provider works: replayed alone, it is a request
        that got no answer; ``finish`` adds the answer's part."""
        with self._lock:
            if request_id in self._where:
                return  # journaled already (an error answered before this ran): that line stands
            # "{" becomes the tag and the part's member; the head has no closing brace
            line: list[bytes | memoryview] = [memoryview(head[0])[1:], *head[1:], b"}\n"]
            if self._write(request_id, _SENT_PART, line):
                self._begun.add(request_id)

    def finish(self, request_id: str, tail: bytes) -> bool:
        """Write the answer's part of a begun record (``spool.record_tail``) before the answer ends, in the
        file that holds its sent part; False when none was begun (the caller appends the whole line)."""
        with self._lock:
            if request_id not in self._begun:
                return False
            self._begun.discard(request_id)
            member = _ANSWER_PART + orjson.dumps(request_id) + b","
            return self._write(request_id, member, [memoryview(tail)[1:]])

    def _write(self, request_id: str, part: bytes, rest: Sequence[bytes | memoryview]) -> bool:
        """One line: the file's tag, ``part``'s member, ``rest``; in the file holding the request's open entry
        if it has one (its lines stay together), else the current file. Under the lock."""
        file = self._where.get(request_id) or self._current
        if file is None:
            return False
        written = _write_all(file.fd, [file.tag(part), *rest], file.size)
        if self.fsync:
            os.fsync(file.fd)
        file.size += written
        if request_id not in self._where:
            file.open += 1
            self._where[request_id] = file
        return True

    def settled(self, request_ids: Iterable[str]) -> None:
        """These requests' records are committed (or spooled, fsynced): their entries may go."""
        with self._lock:
            for request_id in request_ids:
                self._begun.discard(request_id)
                file = self._where.pop(request_id, None)
                if file is not None:
                    self._settle(request_id, file)
            current = self._current
            if current is not None and current.size >= ROTATE_BYTES and current.open:
                self._rotated.append(current)
                self._current = self._spare.pop() if self._spare else self._new_file()

    def _settle(self, request_id: str, file: _File) -> None:
        file.open -= 1
        if file.open:
            return
        if file is not self._current:
            self._rotated.remove(file)
            if len(self._spare) >= SPARE_FILES:
                file.close(delete=True)
                return
            self._spare.append(file)
        file.restart()  # its pages are kept: the next entries overwrite the settled ones

    def pending(self) -> int:
        """Entries not settled yet. Under the lock: ``settled`` forgets an entry before its file is restarted,
        and a reader that saw 0 in between could still find the entries in the file (a test did, once)."""
        with self._lock:
            return len(self._where)

    def close(self) -> None:
        """Stop journaling; the files are deleted only if every entry was settled (else the next start replays them)."""
        with self._lock:
            for file in (*self._rotated, *self._spare, *([self._current] if self._current else [])):
                file.close(delete=not file.open)
            self._rotated, self._spare, self._current = [], [], None


def _write_all(fd: int, parts: Sequence[bytes | memoryview], offset: int) -> int:
    """Write ``parts`` in order at ``offset``, as one ``pwritev`` (a regular file takes it whole; a signal
    could cut a very long one short, and the rest follows); the bytes written."""
    views = [memoryview(p) for p in parts if p]
    total = 0
    while views:
        done = os.pwritev(fd, views, offset + total)
        total += done
        while views and done >= len(views[0]):
            done -= len(views[0])
            views.pop(0)
        if done:
            views[0] = views[0][done:]
    return total


def _current_records(data: bytes) -> Iterator[RequestRecord]:
    """The records of a journal file's current epoch (its header's). Lines of earlier epochs, and the
    torn remains of one a newer line overwrote, are passed over; so is a line that cannot be parsed
    (torn by the kill). A file without a readable header (an older gateway's) has every line read."""
    lines = data.splitlines()
    epoch = None
    if lines:
        with suppress(orjson.JSONDecodeError):
            header = orjson.loads(lines[0])
            if isinstance(header, dict) and list(header) == [EPOCH_KEY]:
                epoch = header[EPOCH_KEY]
                lines = lines[1:]
    whole: dict[str, dict[str, object]] = {}
    sent: dict[str, dict[str, object]] = {}
    answers: dict[str, dict[str, object]] = {}
    for line in lines:
        if not line.strip():
            continue
        try:
            values = orjson.loads(line)
        except orjson.JSONDecodeError:
            continue
        if not isinstance(values, dict) or (epoch is not None and values.get(EPOCH_KEY) != epoch):
            continue
        request_id = values.get("request_id")
        if not isinstance(request_id, str):
            continue
        part = values.pop(PART_KEY, None)
        (sent if part == "sent" else answers if part == "answer" else whole)[request_id] = values
    for request_id in dict.fromkeys([*sent, *whole]):  # each request once
        values = whole.get(request_id)
        if values is None:
            # a begun record: its answer's part, or the request got none (an answer alone, its sent part torn
            # by the kill, cannot be a record, and is passed over as a torn line is)
            values = {**sent[request_id], **answers.get(request_id, _INTERRUPTED)}
        try:
            yield record_from_data(values)
        except (TypeError, ValueError):
            continue


#: The members a begun record that has no answer's part is replayed with.
_INTERRUPTED: dict[str, object] = {"status": INTERRUPTED_STATUS, "error": INTERRUPTED_ERROR}


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
            for record in _current_records(data):
                if record.error != INTERRUPTED_ERROR or record.request_id not in records:
                    records[record.request_id] = record  # an answered copy wins over one without its answer
        yield list(records.values())
        for path, _ in held:
            with suppress(FileNotFoundError):
                path.unlink()
    finally:
        for _, fd in held:
            os.close(fd)
