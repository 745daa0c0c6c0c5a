"""Write a batch of RequestRecords in one transaction, storing only content not seen before.

Contract: ``write_records(conn, records)`` is idempotent (a record whose request id is
already stored is skipped, content already stored is not rewritten), so a spooled batch
can be replayed after a failure without duplicates, and several gateway processes can
write the same content at once. Records are expected to be redacted already.

An agent's turn resends hundreds of messages of which one or two are new. Three things keep
that cheap: each message object is hashed once, across batches (the original and the
assembled bodies share most message objects, and a resent history is last turn's objects,
see ``gateway.sessions.resent``); ``KnownContent`` remembers the hashes this process has
seen committed, and known content gets no row at all; the few unknown keys of a turn are
inserted without a look-up first (``LOOKUP_FROM``), with statements built once per table.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Container, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import Connection, Table, bindparam, insert, select
from sqlalchemy.dialects import postgresql, sqlite

from gateway.decision_tally import tally_decisions
from gateway.history_fold import CHUNK_LIMIT, chunks
from gateway.object_memo import ObjectMemo
from gateway.store.client_tags import client_tags, client_user
from gateway.store.content import ROOT, canonical_json, content_hash, node_hash
from gateway.store.models import Blob, MessageNode, Request
from gateway.store.record import RequestRecord
from gateway.summariser_share import summariser_share

#: Hashes per ``IN (...)`` lookup; well under SQLite's and PostgreSQL's parameter limits.
LOOKUP_CHUNK = 500
#: Unknown keys per table from which a batch asks the database which it holds before inserting.
#: What this writer committed is known and skipped, so a turn's few unknown keys are new content,
#: inserted at once (one statement, not two); many (after a restart, or a session another
#: gateway process wrote) are looked up, so stored content is not sent again.
LOOKUP_FROM = 16


#: Content hashes a writer remembers as stored; ~64 bytes each, so about 30 MB at most.
DEFAULT_KNOWN_LIMIT = 200_000


class KnownContent:
    """Hashes this process saw committed, least recently used forgotten first.

    Add to it only after the transaction that wrote or saw the rows has committed, and
    clear it after a retention pass (which may delete content).
    """

    def __init__(self, limit: int = DEFAULT_KNOWN_LIMIT) -> None:
        self.limit = limit
        self._hashes: OrderedDict[str, None] = OrderedDict()

    def __contains__(self, digest: object) -> bool:
        if digest in self._hashes:
            self._hashes.move_to_end(digest)  # type: ignore[arg-type]
            return True
        return False

    def __len__(self) -> int:
        return len(self._hashes)

    def update(self, digests: Iterable[str]) -> None:
        for digest in digests:
            self._hashes[digest] = None
            self._hashes.move_to_end(digest)
        while len(self._hashes) > self.limit:
            self._hashes.popitem(last=False)

    def clear(self) -> None:
        self._hashes.clear()


@dataclass(frozen=True, slots=True)
class Written:
    """What a ``write_records`` call did: request rows added, and every content hash now stored."""

    requests: int
    content: frozenset[str]


#: The content hash of each message object. A resent history is last turn's objects
#: (``gateway.sessions.resent``), so a turn hashes only its new messages.
_MESSAGE_DIGESTS: ObjectMemo[str] = ObjectMemo()
#: ``message object -> {parent node: node}``: a resent history is last turn's objects after
#: last turn's nodes, so its chain is found without hashing or looking up blobs (a node known
#: committed implies its message blob is: both commit in one transaction). A message has one
#: parent in the client's list and may have another in the assembled one (after a stub).
_LINKS: ObjectMemo[dict[str, str]] = ObjectMemo()
#: ``history chunk -> {parent node: the chunk's last node}``: a resent chunk after the same
#: history ends at the same node, so a written one is skipped without a look-up per message.
_EXITS: ObjectMemo[dict[str, str]] = ObjectMemo(CHUNK_LIMIT)
#: ``(parent node, message hash) -> node``: a resent history's chain is last turn's chain.
_NODES: dict[tuple[str, str], str] = {}
_NODES_LIMIT = 50_000


def _node(parent: str, message: str) -> str:
    found = _NODES.get((parent, message))
    if found is None:
        if len(_NODES) >= _NODES_LIMIT:
            _NODES.clear()
        found = _NODES[(parent, message)] = node_hash(parent, message)
    return found


@dataclass(slots=True)
class _Batch:
    """The rows one batch needs, deduplicated by key; content in ``known`` needs no row."""

    known: Container[str] = ()
    blobs: dict[str, dict[str, Any]] = field(default_factory=dict)
    nodes: dict[str, dict[str, Any]] = field(default_factory=dict)
    requests: dict[str, dict[str, Any]] = field(default_factory=dict)
    _list_ids: dict[int, tuple[str, int]] = field(default_factory=dict)  # lists live while the batch runs

    def blob(self, kind: str, value: Any, now: float) -> str:
        data = canonical_json(value)
        digest = content_hash(data)
        if digest not in self.blobs:
            text = data.decode()
            self.blobs[digest] = {"hash": digest, "kind": kind, "size": len(data), "content": text, "created_at": now}
        return digest

    def message(self, message: Any, now: float) -> str:
        digest = _MESSAGE_DIGESTS.get(message)
        if digest is None or (digest not in self.blobs and digest not in self.known):
            digest = _MESSAGE_DIGESTS.put(message, self.blob("message", message, now))
        return digest

    def messages(self, messages: Sequence[Any], now: float) -> tuple[str, int]:
        """Store a message list; return the head node naming it and its length.

        A chunk of the history (``gateway.history_fold``) whose last node after the same
        parent is already written is skipped whole: nodes are written with their ancestors,
        in one transaction, so that node's chunk is written too.
        """
        found = self._list_ids.get(id(messages))
        if found is not None:
            return found
        parent, nodes, known = ROOT, self.nodes, self.known
        for chunk in chunks(messages):
            exits = _EXITS.get(chunk)
            last = exits.get(parent) if exits is not None else None
            if last is not None and (last in nodes or last in known):
                parent = last
                continue
            entry = parent
            for depth, m in enumerate(chunk.messages, start=chunk.start + 1):
                parent = self._link(m, parent, depth, now)
            if exits is None or len(exits) >= 4:
                exits = _EXITS.put(chunk, {})
            exits[entry] = parent
        found = self._list_ids[id(messages)] = (parent, len(messages))
        return found

    def _link(self, m: Any, parent: str, depth: int, now: float) -> str:
        """The node of message ``m`` after ``parent``, with its rows added if not written yet."""
        nodes, known = self.nodes, self.known
        links = _LINKS.get(m)
        node = links.get(parent) if links is not None else None
        if node is not None and (node in nodes or node in known):
            return node  # same message after the same history: a node already written
        digest = self.message(m, now)
        node = _node(parent, digest)
        if node not in nodes and node not in known:
            nodes[node] = {"hash": node, "parent": parent, "message": digest, "depth": depth}
        if links is None or len(links) >= 4:
            links = _LINKS.put(m, {})
        links[parent] = node
        return node


def write_records(conn: Connection, records: Iterable[RequestRecord], *, known: KnownContent | None = None) -> Written:
    """Insert ``records`` (and the content they need) in the caller's transaction.

    ``known`` hashes are taken as stored without asking the database. The caller adds
    the returned ``content`` to its KnownContent once the transaction has committed.
    """
    skip: Container[str] = known if known is not None else ()
    batch = _Batch(known=skip)
    now = time.time()
    for record in records:
        if record.request_id not in batch.requests:
            batch.requests[record.request_id] = _request_row(batch, record, now)
    _insert_missing(conn, Blob.__table__, batch.blobs, skip=skip)  # type: ignore[arg-type]
    _insert_missing(conn, MessageNode.__table__, batch.nodes, skip=skip)  # type: ignore[arg-type]
    added = _insert_missing(conn, Request.__table__, batch.requests, key="request_id")  # type: ignore[arg-type]
    return Written(requests=added, content=frozenset(batch.blobs) | frozenset(batch.nodes))


def split_body(body: Mapping[str, Any]) -> tuple[Sequence[Any], Any, dict[str, Any]]:
    """A request body as (messages, tools or None, every other field)."""
    params = {k: v for k, v in body.items() if k not in ("messages", "tools")}
    return body.get("messages") or (), body.get("tools"), params


def answer_message(record: RequestRecord) -> dict[str, Any] | None:
    """The assistant message the model produced, shaped as clients resend it next turn."""
    if record.response_text is None and not record.tool_calls:
        return None
    message: dict[str, Any] = {"role": "assistant", "content": record.response_text}
    if record.tool_calls:
        message["tool_calls"] = record.tool_calls
    return message


def response_meta(response: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """The response without its message bodies (kept once, as the ``answer`` blob)."""
    if response is None:
        return None
    choices = [{k: v for k, v in c.items() if k != "message"} for c in response.get("choices") or ()]
    return {**response, "choices": choices}


def _request_row(batch: _Batch, record: RequestRecord, now: float) -> dict[str, Any]:
    o_msgs, o_tools, o_params = split_body(record.original)
    a_msgs, a_tools, a_params = split_body(record.assembled)
    o_head, o_count = batch.messages(o_msgs, now)
    a_head, a_count = batch.messages(a_msgs, now)
    answer = answer_message(record)
    usage = record.usage
    tally = tally_decisions(record.decisions)
    share = summariser_share(record.decisions)
    return {
        "request_id": record.request_id,
        "session_id": record.session_id,
        "created_at": record.created_at,
        "model": record.model,
        "provider": record.provider,
        "caller": record.caller,
        "stream": record.stream,
        "turn": record.turn,
        "replay_of": record.replay_of,
        "status": record.status,
        "error": record.error,
        "original_head": o_head,
        "original_count": o_count,
        "original_tools": None if o_tools is None else batch.blob("tools", o_tools, now),
        "original_params": o_params,
        "assembled_head": a_head,
        "assembled_count": a_count,
        "assembled_tools": None if a_tools is None else batch.blob("tools", a_tools, now),
        "assembled_params": a_params,
        "decisions": record.decisions,
        "answer": None if answer is None else batch.blob("answer", answer, now),
        "response_meta": response_meta(record.response),
        "finish_reason": record.finish_reason,
        "prompt_tokens": usage.prompt_tokens,
        "completion_tokens": usage.completion_tokens,
        "cached_tokens": usage.cached_tokens,
        "cache_write_tokens": usage.cache_write_tokens,
        "evaluated_tokens": usage.evaluated_tokens,
        "reused_tokens": usage.reused_tokens,
        "tokens_original": record.tokens_original,
        "tokens_assembled": record.tokens_assembled,
        "overhead_ms": record.overhead_ms,
        "ttfb_ms": record.ttfb_ms,
        "total_ms": record.total_ms,
        "budget": record.budget,
        "route": record.route,
        "compactions": tally.compactions,
        "reverted": bool(tally.reverted),
        "upstream_calls": max(tally.upstream_calls, 1) + tally.summarizer_billed if record.assembled else 0,
        "client_user": client_user(record.original),
        "tags": client_tags(record.original),
        "summarizer_model": share.model,
        "summarizer_prompt_tokens": share.prompt_tokens,
        "summarizer_cached_tokens": share.cached_tokens,
        "summarizer_completion_tokens": share.completion_tokens,
    }


def _insert_missing(
    conn: Connection,
    table: Table,
    rows: dict[str, dict[str, Any]],
    key: str = "hash",
    skip: Container[str] = (),
) -> int:
    """Insert the rows whose key is not stored yet; concurrent writers of the same key are ignored.

    Up to ``LOOKUP_FROM`` unknown keys are inserted straight away, and the database reports which
    it took (an insert that finds its key stored does nothing). More are looked up first, so the
    content of rows already stored is not sent again.
    """
    keys = [k for k in rows if k not in skip]
    if not keys:
        return 0
    statements = _statements(conn, table, key)
    if len(keys) <= LOOKUP_FROM:
        inserted = conn.execute(statements.insert_returning, [rows[k] for k in keys])
        return len(inserted.all())
    present: set[str] = set()
    for i in range(0, len(keys), LOOKUP_CHUNK):
        present.update(conn.scalars(statements.lookup, {"keys": keys[i : i + LOOKUP_CHUNK]}))
    missing = [rows[k] for k in keys if k not in present]
    if missing:
        conn.execute(statements.insert, missing)
    return len(missing)


@dataclass(frozen=True, slots=True)
class _Statements:
    """One table's statements in one dialect, built once: building and compiling-cache-keying a
    fresh ``INSERT ... ON CONFLICT`` or ``IN (...)`` per batch was a third of the writer's time."""

    insert: Any
    insert_returning: Any
    lookup: Any


_STATEMENTS: dict[tuple[str, str, str], _Statements] = {}


def _statements(conn: Connection, table: Table, key: str) -> _Statements:
    dialect = conn.dialect.name
    found = _STATEMENTS.get((dialect, table.name, key))
    if found is None:
        column = table.c[key]
        ignore = _insert_ignore(dialect, table)
        lookup = select(column).where(column.in_(bindparam("keys", expanding=True)))
        found = _STATEMENTS[(dialect, table.name, key)] = _Statements(ignore, ignore.returning(column), lookup)
    return found


def _insert_ignore(dialect: str, table: Table) -> Any:
    if dialect == "sqlite":
        return sqlite.insert(table).on_conflict_do_nothing()
    if dialect == "postgresql":
        return postgresql.insert(table).on_conflict_do_nothing()
    return insert(table)
