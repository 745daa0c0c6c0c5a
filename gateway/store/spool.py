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
from gateway.store.record import FLAT_FIELDS, RequestRecord, record_dict
from gateway.upstream.usage import Usage

_FIELDS = frozenset(FLAT_FIELDS)


def record_to_json(record: RequestRecord) -> bytes:
    return orjson.dumps(record_dict(record), option=orjson.OPT_NON_STR_KEYS)


def record_from_json(line: bytes) -> RequestRecord:
    data: dict[str, Any] = orjson.loads(line)
    values = {k: v for k, v in data.items() if k in _FIELDS}
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
            out.write(b"".join(record_to_json(r) + b"\n" for r in records))
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
