"""The write-ahead journal: records journaled before the answer survive a kill of the process and are
stored exactly once by the next start; a living process's journal is never replayed under it; it stays
small; secrets never reach it (issue 35)."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import orjson
import pytest
from sqlalchemy import func, select

from gateway.store import journal as journal_module
from gateway.store.engine import make_engine
from gateway.store.journal import Journal, journal_glob, orphans
from gateway.store.models import Request
from gateway.store.spool import record_from_json, record_line, record_parts
from gateway.store.sql_recorder import SqlRecorder
from tests.procs import _env
from tests.store.records import make_record


def _files(spool: Path) -> list[Path]:
    directory, pattern = journal_glob(spool)
    return sorted(directory.glob(pattern))


def _stored(url: str) -> dict[str, tuple[int, int]]:
    """request id -> (rows with that id, the stored tokens_original)."""
    engine = make_engine(url)
    try:
        with engine.connect() as conn:
            rows = conn.execute(
                select(Request.request_id, func.count(), func.max(Request.tokens_original)).group_by(Request.request_id)
            )
            return {request_id: (n, tokens) for request_id, n, tokens in rows}
    finally:
        engine.dispose()


#: A gateway process answering requests and killed before its writer committed the last of them.
CHILD = textwrap.dedent(
    """
    import asyncio, os, signal, sys, time
    import orjson
    from gateway.store.sql_recorder import SqlRecorder
    from tests.store.records import make_record

    async def main() -> None:
        recorder = SqlRecorder(database_url=sys.argv[1], spool_path=sys.argv[2])
        await recorder.start()
        said = [[{"role": "user", "content": f"committed {i}"}] for i in range(3)]
        committed = [make_record(messages, tokens_original=111) for messages in said]
        for record in committed:
            recorder.journal(record.changed(tokens_original=0))  # as journaled before the answer: no counts
            recorder.record(record)
        while recorder.written < len(committed):
            await asyncio.sleep(0.01)
        for record in committed:  # journaled again and not settled: committed, then killed before the trim
            recorder.journal(record.changed(tokens_original=0))
        queued = [make_record([{"role": "user", "content": f"answered {i}"}]) for i in range(5)]
        for record in queued:  # answered: journaled, the kill comes before the writer commits them
            recorder.journal(record)
        ids = {"committed": [r.request_id for r in committed], "queued": [r.request_id for r in queued]}
        sys.stdout.write(orjson.dumps(ids).decode())
        sys.stdout.flush()
        os.kill(os.getpid(), signal.SIGKILL)

    asyncio.run(main())
    """
)


def _killed_gateway(url: str, spool: Path) -> dict[str, list[str]]:
    done = subprocess.run([sys.executable, "-c", CHILD, url, str(spool)], env=_env(), capture_output=True, timeout=120)
    assert done.returncode == -9, done.stderr.decode()[-2000:]
    ids: dict[str, list[str]] = orjson.loads(done.stdout)
    return ids


async def test_records_journaled_before_a_kill_are_stored_exactly_once_at_the_next_start(
    db_url: str, tmp_path: Path
) -> None:
    spool = tmp_path / "spool.jsonl"
    ids = _killed_gateway(db_url, spool)
    assert len(_files(spool)) == 1, "the killed process left its journal"
    before = _stored(db_url)
    assert set(before) == set(ids["committed"]), "the answered requests were only in the journal"

    recorder = SqlRecorder(database_url=db_url, spool_path=str(spool))
    await recorder.start()  # replays before it serves
    after = _stored(db_url)
    await recorder.close()
    assert set(after) == set(ids["committed"]) | set(ids["queued"]), "every answered request recorded, 0 lost"
    assert {n for n, _ in after.values()} == {1}, "none twice"
    assert {after[i][1] for i in ids["committed"]} == {111}, "a committed record is not replaced by its journal copy"
    assert _files(spool) == [], "the replayed journal and the closed recorder's own are gone"


def _replayed(path: Path) -> list[str]:
    """The request ids a next start would replay from the journal file at ``path``."""
    return [r.request_id for r in journal_module._current_records(path.read_bytes())]


async def test_the_journal_is_settled_once_its_records_are_committed(db_url: str, tmp_path: Path) -> None:
    spool = tmp_path / "spool.jsonl"
    recorder = SqlRecorder(database_url=db_url, spool_path=str(spool))
    await recorder.start()
    (own,) = _files(spool)
    records = [make_record([{"role": "user", "content": f"hello {i}"}]) for i in range(4)]
    for record in records:
        recorder.journal(record)
    assert _replayed(own) == [r.request_id for r in records] and recorder.status()["journal_pending"] == 4
    for record in records:
        recorder.record(record)
    # The writer counts a batch as written when it commits, then settles its entries: wait for both.
    deadline = time.monotonic() + 30
    while (recorder.written < 4 or recorder.status()["journal_pending"]) and time.monotonic() < deadline:
        await asyncio.sleep(0.01)
    assert recorder.written == 4 and recorder.status()["journal_pending"] == 0
    assert _replayed(own) == [], "committed: the entries no longer count"
    await recorder.close()
    assert not own.exists()


def test_a_living_processs_journal_is_not_replayed_and_a_dead_ones_is_taken_once(tmp_path: Path) -> None:
    spool = tmp_path / "spool.jsonl"
    living = Journal(spool)
    living.open()
    record = make_record([{"role": "user", "content": "in flight"}])
    living.append(record.request_id, record_line(record))
    with orphans(spool) as found:
        assert found == [], "another worker's journal, still held, is left alone"
    assert living.path is not None and living.path.exists()

    dead = Journal(spool)
    dead.open()
    other = make_record([{"role": "user", "content": "answered"}])
    dead.append(other.request_id, record_line(other))
    dead.append(other.request_id, record_line(other))  # twice in one file: replayed once
    dead.close()  # an entry open at close: the file stays for the next start, unlocked as after a kill
    with orphans(spool) as first, orphans(spool) as second:
        assert [r.request_id for r in first] == [other.request_id]
        assert second == [], "a file another starting worker holds is not taken twice"
    with orphans(spool) as third:
        assert third == [], "taken files are deleted"
    living.close()


def test_rotated_files_are_deleted_once_their_entries_are_settled(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    records = [make_record([{"role": "user", "content": f"turn {i} " * 20}]) for i in range(4)]
    monkeypatch.setattr(journal_module, "ROTATE_BYTES", sum(len(record_line(r)) for r in records[:3]))
    spool = tmp_path / "spool.jsonl"
    journal = Journal(spool)
    journal.open()
    for record in records[:3]:
        journal.append(record.request_id, record_line(record))
    journal.settled([])  # the file is past its size with entries open: a new one takes the next entries
    first, second = _files(spool)
    journal.append(records[3].request_id, record_line(records[3]))
    journal.settled(r.request_id for r in records[:3])
    assert _files(spool) == [first, second], "the rotated file, all settled, is kept for the next rotation"
    assert [_replayed(f) for f in (first, second)] in ([[], [records[3].request_id]], [[records[3].request_id], []])
    for record in records[:3]:  # the current file past its size again: the spare takes the next entries
        journal.append(record.request_id, record_line(record))
    journal.settled([])
    assert _files(spool) == [first, second], "no third file: the spare was reused"
    journal.settled(r.request_id for r in records)
    assert [_replayed(f) for f in (first, second)] == [[], []], "all settled: nothing would be replayed"
    journal.close()
    assert _files(spool) == []


def test_a_reused_file_replays_only_its_current_entries(tmp_path: Path) -> None:
    """Settled entries are overwritten in place (the file keeps its pages); a shorter new entry leaves the
    torn remains of a longer old one behind it, and neither they nor older whole lines are replayed."""
    spool = tmp_path / "spool.jsonl"
    journal = Journal(spool)
    journal.open()
    long = [make_record([{"role": "user", "content": f"long turn {i} " * 200}]) for i in range(3)]
    for record in long:
        journal.append(record.request_id, record_line(record))
    assert journal.path is not None
    size = journal.path.stat().st_size
    journal.settled(r.request_id for r in long)
    short = make_record([{"role": "user", "content": "short"}])
    journal.append(short.request_id, record_line(short))
    assert journal.path.stat().st_size == size, "written over the settled entries, not appended"
    assert _replayed(journal.path) == [short.request_id]
    journal.close()  # an entry open at close: the file stays, as after a kill, and the next start takes it
    with orphans(spool) as found:
        assert [r.request_id for r in found] == [short.request_id]


async def test_secrets_never_reach_the_journal(db_url: str, tmp_path: Path) -> None:
    secret = "sk-proj-" + "A1b2C3d4" * 5
    spool = tmp_path / "spool.jsonl"
    recorder = SqlRecorder(database_url=db_url, spool_path=str(spool), redact_secrets=True)
    await recorder.start()
    record = make_record([{"role": "user", "content": f"my key is {secret}"}], response_text=f"echo {secret}")
    recorder.journal(record)
    (own,) = _files(spool)
    data = own.read_bytes()
    assert secret.encode() not in data and b"[REDACTED]" in data
    recorder.record(record)
    await recorder.close()


def test_a_record_in_pieces_is_one_line_even_when_the_kernel_takes_part_of_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The journal writes ``record_parts`` with ``os.pwritev``, never joined first; a write that takes only
    part of them (a signal mid-write) goes on from the byte it stopped at, so the file holds the line whole."""
    body = {"model": "m", "messages": [{"role": "user", "content": "read the file " * 200}]}
    assembled = {**body, "messages": [{"role": "user", "content": "read the file"}]}
    record = make_record(body["messages"]).changed(
        original=body, assembled=assembled, original_json=orjson.dumps(body), assembled_json=orjson.dumps(assembled)
    )
    parts = record_parts(record)
    assert len(parts) > 1, "the bodies travel as their own pieces"
    pwritev = journal_module.os.pwritev
    monkeypatch.setattr(
        journal_module.os, "pwritev", lambda fd, views, offset: pwritev(fd, [bytes(views[0])[:7]], offset)
    )
    journal = Journal(tmp_path / "spool.jsonl")
    journal.open()
    journal.append(record.request_id, parts)
    assert journal.path is not None
    header, written = journal.path.read_bytes().split(b"\n", 1)
    assert orjson.loads(header) == {"journal_epoch": 1}
    assert written == b'{"journal_epoch":1,' + record_line(record)[1:] and record_line(record) == b"".join(parts)
    back = record_from_json(written)
    assert (back.original, back.assembled) == (body, assembled)
    journal.close()


@pytest.mark.parametrize("secret", [None, "sk-proj-" + "A1b2C3d4" * 5])
async def test_a_record_begun_while_the_provider_works_replays_as_the_line_made_at_the_answer(
    db_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, secret: str | None
) -> None:
    """``look_ahead`` encodes and writes the request's part of its journal record (its bodies above all: a
    105K-token body's scans, copies and write) while the provider works; the journal before the answer then
    encodes and writes only what the answer decides, and the two lines replay as the one line made at the
    answer would, secrets masked alike."""
    import gateway.store.sql_recorder as recorder_module

    said = "read the file\n" * 50 + (f"my key is {secret}" if secret else "")
    body = {"model": "m", "messages": [{"role": "user", "content": said}]}
    assembled = {**body, "prompt_cache_key": "s-1"}
    raw, sent_bytes = orjson.dumps(body), orjson.dumps(assembled)
    record = make_record(body["messages"], response_text="done").changed(
        original=body, assembled=assembled, original_json=raw, assembled_json=sent_bytes
    )
    journaled: list[bytes] = []
    for ahead in (False, True):
        spool = tmp_path / f"ahead-{ahead}" / "spool.jsonl"
        spool.parent.mkdir()
        recorder = SqlRecorder(database_url=db_url, spool_path=str(spool), redact_secrets=True)
        await recorder.start()
        (own,) = _files(spool)
        encoded: list[object] = []
        if ahead:
            recorder.look_ahead(record.sent)
            begun = own.read_bytes().split(b"\n")[1:-1]
            assert len(begun) == 1 and b"read the file" in begun[0], "the request's part is on disk before the answer"
            assert _replayed(own) == [record.request_id], "a kill now replays the request, without an answer"
            real = recorder_module.sent_head
            counted = lambda sent, seen=encoded, f=real: seen.append(sent) or f(sent)  # noqa: E731
            monkeypatch.setattr(recorder_module, "sent_head", counted)
        recorder.journal(record)
        assert encoded == [], "the request's part was encoded ahead, not again at the answer"
        data = own.read_bytes()
        journaled.append(data)
        if ahead:
            answer = data.split(b"\n")[2]
            assert b"read the file" not in answer and b'"done"' in answer, "the answer's line carries no body"
        recorder.record(record)
        await recorder.close()
    (whole,), (joined,) = (list(journal_module._current_records(d)) for d in journaled)
    assert joined == whole
    assert joined.response_text == "done" and joined.status == 200 and joined.assembled["prompt_cache_key"] == "s-1"
    if secret:
        assert all(secret.encode() not in d and b"[REDACTED]" in d for d in journaled)
    else:
        assert (joined.original, joined.assembled) == (body, assembled)


def test_a_request_begun_and_never_answered_replays_as_interrupted(tmp_path: Path) -> None:
    """The gateway killed while the provider worked: the request is in the journal, with no answer, and a
    whole line of the same request (journaled again, answered) wins over it, in its file or another."""
    record = make_record([{"role": "user", "content": "how long is the wait?"}], response_text="ten minutes")
    other = make_record([{"role": "user", "content": "and the queue?"}], response_text="short")
    journal = Journal(tmp_path / "spool.jsonl")
    journal.open()
    journal.begin(record.request_id, record_parts(record)[:-1])
    journal.begin(other.request_id, record_parts(other)[:-1])
    journal.append(other.request_id, record_parts(other))  # the served-tools path: the whole line instead
    assert journal.finish(other.request_id, b"{}\n") is False, "nothing begun is left for it"
    assert journal.path is not None
    size = journal.path.stat().st_size
    journal.begin(other.request_id, record_parts(other)[:-1])  # a look-ahead that ran after its whole line
    assert journal.path.stat().st_size == size, "a request journaled already is not begun again"
    (interrupted, answered) = journal_module._current_records(journal.path.read_bytes())
    assert interrupted.request_id == record.request_id and interrupted.original == record.original
    assert (interrupted.status, interrupted.error) == (
        journal_module.INTERRUPTED_STATUS,
        journal_module.INTERRUPTED_ERROR,
    )
    assert interrupted.response_text is None
    assert answered == other
    assert journal.pending() == 2
    journal.settled([record.request_id, other.request_id])
    assert journal.pending() == 0 and list(journal_module._current_records(journal.path.read_bytes())) == []
    journal.close()
