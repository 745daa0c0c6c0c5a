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
from dataclasses import fields
from pathlib import Path
from typing import Any

import orjson

from gateway.store.engine import create_private
from gateway.store.record import FLAT_FIELDS, TRANSIENT_FIELDS, Forwarded, RequestRecord
from gateway.upstream.usage import Usage

_FIELDS = frozenset(FLAT_FIELDS)
#: Set on a line whose ``assembled`` body is its ``original`` one, written once (and ``assembled`` null).
SAME_BODIES = "assembled_is_original"
#: Set on a line whose ``assembled`` body is its ``original`` one with top-level keys appended (a pass that
#: only adds a parameter, ``prompt_cache_key``: ``api.raw_forward.with_params_added``): those keys as an
#: object, ``assembled`` null. The 14K-token agent body was otherwise written twice, ~56 KB each.
ADDED_KEYS = "assembled_adds"
_STORED = tuple(name for name in FLAT_FIELDS if name not in TRANSIENT_FIELDS)
#: The stored values the forwarded request alone decides (``decisions`` gains the lint findings after the
#: answer), and the rest: a line is the first (``sent_head``), then the second.
_SENT = tuple(name for name in _STORED if name in {f.name for f in fields(Forwarded)} and name != "decisions")
_REST = tuple(name for name in _STORED if name not in _SENT)
#: Carriage returns and newlines, which valid JSON holds only as whitespace between tokens.
_LINE_BREAKS = bytes.maketrans(b"\r\n", b"  ")


def record_line(record: RequestRecord) -> bytes:
    """``record`` as one JSON line (newline included), the spool's and the journal's format."""
    return b"".join(record_parts(record))


def record_parts(record: RequestRecord, head: Sequence[bytes] | None = None) -> list[bytes]:
    """``record_line`` in pieces whose concatenation is the line: the journal hands them to one
    ``os.writev``, so a 105K-token body is never copied into a joined line first (a fresh half-megabyte
    buffer each request is page faults as much as copying: ~0.2 ms a record, measured).

    The line is the request's ``sent_head`` (``head``, when it was made ahead: the journal's, while the
    provider worked) and then the members the answer and the bookkeeping decide.
    """
    tail = record_tail(record)
    # "{" of the tail becomes the comma after the head's last member (the head always has members)
    return [*(sent_head(record.sent) if head is None else head), b"," + tail[1:]]


def record_tail(record: RequestRecord) -> bytes:
    """The members of a record line that ``sent_head`` leaves out (the answer, the outcome, the counts, the
    decisions), as one JSON object and its newline: the journal's answer line when the head went ahead."""
    rest = {name: getattr(record, name) for name in _REST}
    return orjson.dumps(rest, option=orjson.OPT_NON_STR_KEYS | orjson.OPT_APPEND_NEWLINE)


def sent_head(sent: Forwarded) -> list[bytes]:
    """The start of a record line, up to its last member the forwarded request decides (no closing brace).

    The values are read as they are (no ``asdict`` copy); bodies whose JSON bytes the record
    carries (the client's own, the bytes forwarded) are embedded as those bytes rather than
    encoded again: a 105K-token body twice is most of a record. Line breaks in them can only be
    whitespace, so they become spaces and the line stays one line. A request forwarded as it came
    (``assembled`` the same as ``original``) has its body written once (``SAME_BODIES``), and so has
    one forwarded with parameters appended (``ADDED_KEYS``).
    """
    data = {name: getattr(sent, name) for name in _SENT}
    original_json, assembled_json = sent.original_json, sent.assembled_json
    bodies: list[bytes] = []
    if original_json is not None and assembled_json is not None:
        del data["original"]
        bodies += [b'{"original":', _one_line(original_json)]
        same = assembled_json is original_json or assembled_json == original_json
        added = None if same else appended_keys(original_json, assembled_json)
        if added is not None:
            bodies += [b',"' + ADDED_KEYS.encode() + b'":', _one_line(added)]
        if same or added is not None:
            data["assembled"] = None
        else:
            del data["assembled"]
            bodies += [b',"assembled":', _one_line(assembled_json)]
    else:
        same = sent.assembled is sent.original
        if same:
            data["assembled"] = None
    if same:
        data[SAME_BODIES] = True
    members = orjson.dumps(data, option=orjson.OPT_NON_STR_KEYS)[:-1]  # request_id at least: never "{"
    if not bodies:
        return [members]
    return [*bodies, b"," + members[1:]]  # "{" becomes the comma after the bodies


def appended_keys(original: bytes, assembled: bytes) -> bytes | None:
    """The JSON object of the members ``assembled`` appends to ``original``, when that is all it changes.

    Both are JSON objects' bytes. ``original`` up to its closing brace ends at its top level, so an
    ``assembled`` that starts with those bytes and a comma holds ``original``'s members and then its
    own, up to its closing brace: ``{`` and the rest is an object of exactly the appended members.
    """
    end = original.rstrip()
    cut = len(end) - 1  # where the closing brace of ``original`` stands
    if cut < 1 or end[cut] != 0x7D or assembled[cut : cut + 1] != b",":
        return None
    if not assembled.startswith(memoryview(end)[:cut]):
        return None
    return b"{" + assembled[cut + 1 :]


def _one_line(raw: bytes) -> bytes:
    return raw.translate(_LINE_BREAKS) if b"\n" in raw or b"\r" in raw else raw


def record_to_json(record: RequestRecord) -> bytes:
    """``record`` as JSON without the newline (``record_line``)."""
    return record_line(record)[:-1]


def record_from_json(line: bytes) -> RequestRecord:
    return record_from_data(orjson.loads(line))


def record_from_data(data: dict[str, Any]) -> RequestRecord:
    """A record from its line, parsed (members it does not know, the journal's epoch, are ignored)."""
    values = {k: v for k, v in data.items() if k in _FIELDS}
    if data.get(SAME_BODIES):
        values["assembled"] = values.get("original")
    elif isinstance(data.get(ADDED_KEYS), dict) and isinstance(values.get("original"), dict):
        values["assembled"] = {**values["original"], **data[ADDED_KEYS]}  # a later duplicate key wins, as in a parse
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
