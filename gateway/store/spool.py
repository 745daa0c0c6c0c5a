"""A local JSONL file that holds records while the database cannot be reached.

Each line is one RequestRecord as JSON (already redacted). ``append`` is called from the
writer's thread, never from the event loop; ``take`` hands the spooled records back and
empties the file only once the caller has written them, so a crash between the two
leaves the records in the file (the writer is idempotent, replays are harmless).
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import orjson

from gateway.store.engine import create_private
from gateway.store.record import FLAT_FIELDS, TRANSIENT_FIELDS, RequestRecord
from gateway.upstream.usage import Usage

_FIELDS = frozenset(FLAT_FIELDS)
#: Set on a line whose ``assembled`` body is its ``original`` one, written once (and ``assembled`` null).
SAME_BODIES = "assembled_is_original"
_STORED = tuple(name for name in FLAT_FIELDS if name not in TRANSIENT_FIELDS)
#: Carriage returns and newlines, which valid JSON holds only as whitespace between tokens.
_LINE_BREAKS = bytes.maketrans(b"\r\n", b"  ")


def record_line(record: RequestRecord) -> bytes:
    """``record`` as one JSON line (newline included), the spool's and the journal's format.

    The values are read as they are (no ``asdict`` copy); bodies whose JSON bytes the record
    carries (the client's own, the bytes forwarded) are embedded as those bytes rather than
    encoded again: a 105K-token body twice is most of a record. Line breaks in them can only be
    whitespace, so they become spaces and the line stays one line. A request forwarded as it came
    (``assembled`` the same as ``original``) has its body written once (``SAME_BODIES``).
    """
    data = {name: getattr(record, name) for name in _STORED}
    original_json, assembled_json = record.original_json, record.assembled_json
    if original_json is not None and assembled_json is not None:
        data["original"] = orjson.Fragment(_one_line(original_json))
        same = assembled_json is original_json or assembled_json == original_json
        data["assembled"] = None if same else orjson.Fragment(_one_line(assembled_json))
    else:
        same = record.assembled is record.original
        if same:
            data["assembled"] = None
    if same:
        data[SAME_BODIES] = True
    return orjson.dumps(data, option=orjson.OPT_NON_STR_KEYS | orjson.OPT_APPEND_NEWLINE)


def _one_line(raw: bytes) -> bytes:
    return raw.translate(_LINE_BREAKS) if b"\n" in raw or b"\r" in raw else raw


def record_to_json(record: RequestRecord) -> bytes:
    """``record`` as JSON without the newline (``record_line``)."""
    return record_line(record)[:-1]


def record_from_json(line: bytes) -> RequestRecord:
    data: dict[str, Any] = orjson.loads(line)
    values = {k: v for k, v in data.items() if k in _FIELDS}
    if data.get(SAME_BODIES):
        values["assembled"] = values.get("original")
    values["usage"] = Usage(**(values.get("usage") or {}))
    return RequestRecord.of(**values)


class Spool:
    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)

    def append(self, records: Sequence[RequestRecord]) -> None:
        """Append records durably (flushed and fsynced): they exist nowhere else."""
        if not self.path.exists():
            create_private(self.path)  # it holds prompts and answers, like the database
        with self.path.open("ab") as out:
            out.write(b"".join(record_line(r) for r in records))
            out.flush()
            os.fsync(out.fileno())

    def pending(self) -> bool:
        return self.path.exists() and self.path.stat().st_size > 0

    @contextmanager
    def take(self) -> Iterator[list[RequestRecord]]:
        """Yield the spooled records; the file is emptied only if the block succeeds.

        A line that cannot be parsed (a torn write at a crash) is skipped: the rest
        must not be held hostage by it.
        """
        if not self.pending():
            yield []
            return
        records = []
        for line in self.path.read_bytes().splitlines():
            if line.strip():
                try:
                    records.append(record_from_json(line))
                except (orjson.JSONDecodeError, TypeError):
                    continue
        yield records
        self.path.unlink()
