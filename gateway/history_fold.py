"""Answer a question about a whole history at the cost of what changed in it.

A request asks many questions of its history: its token count, where its system and user
messages are, which tools it called, its prefix blocks. Each is a walk of every message,
~0.1-0.3 us a message in Python, so a dozen walks make a 600-message turn cost milliseconds
more than its first turn, though only two or three messages are new.

A resent history is made of last turn's very objects (``gateway.sessions.resent``). So the
history is cut into chunks of ``CHUNK`` messages at fixed positions (0, 32, 64, ...), and a
chunk is named by the identities of its messages and its position: the same objects at the
same place are the same ``Chunk``, found again with a C-level walk of ids (~10 ns a message).
A ``HistoryFold`` computes its answer per chunk, remembers it per ``Chunk``, and combines the
chunks' answers. An appended turn changes only the last chunk; a message changed in place
(a stubbed tool result, a system prompt with today's date) only its own chunk. A history
whose messages all move (a client dropping its oldest turn every turn) costs a full walk,
as before.

Answers must depend only on the messages' values and positions: messages are never mutated
once parsed. Chunks hold their messages, so an id cannot be reused while its chunk is
remembered; all the memos are caches, bounded and cleared whole when full.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from itertools import chain
from typing import Any, Generic, TypeVar

from gateway.object_memo import DEFAULT_LIMIT, ObjectMemo

Message = Mapping[str, Any]
P = TypeVar("P")

#: Messages per chunk: an appended turn re-walks at most this many; a 600-message history is 19 chunks.
CHUNK = 32
#: Chunks remembered, here and per fold: as many messages as an ``ObjectMemo`` holds (~35
#: conversations of 300 messages), since chunks keep their messages alive as its entries do.
CHUNK_LIMIT = DEFAULT_LIMIT // CHUNK


class Chunk:
    """``CHUNK`` messages (fewer at the end) at position ``start``; compared and hashed by identity."""

    __slots__ = ("messages", "start")

    def __init__(self, start: int, messages: tuple[Message, ...]) -> None:
        self.start = start
        self.messages = messages

    def __repr__(self) -> str:
        return f"Chunk({self.start}, {len(self.messages)} messages)"


#: Process-wide and pure: chunks are named by their messages' identities and position alone.
_CHUNKS: dict[tuple[int, tuple[int, ...]], Chunk] = {}
#: Process-wide and pure: a Context's message tuple is asked about by several passes; its chunks are found once.
_BY_TUPLE: ObjectMemo[tuple[Chunk, ...]] = ObjectMemo(limit=256)


def chunks(messages: Sequence[Message]) -> tuple[Chunk, ...]:
    """The history as chunks; the same objects at the same positions give the same chunks."""
    if messages.__class__ is tuple:
        return _BY_TUPLE.get_or(messages, _chunks)
    return _chunks(messages)


def _chunks(messages: Sequence[Message]) -> tuple[Chunk, ...]:
    ids = tuple(map(id, messages))
    known = _CHUNKS
    out: list[Chunk] = []
    for start in range(0, len(ids), CHUNK):
        key = (start, ids[start : start + CHUNK])
        chunk = known.get(key)
        if chunk is None:
            if len(known) >= CHUNK_LIMIT:
                known.clear()
            chunk = known[key] = Chunk(start, tuple(messages[start : start + CHUNK]))
        out.append(chunk)
    return tuple(out)


class HistoryFold(Generic[P]):
    """One question about a history, answered per chunk and remembered per chunk.

    ``part(chunk)`` answers for the chunk's messages alone (using ``chunk.start`` for
    positions); the caller combines the parts, in order (see ``index_fold``). A part that
    needs a request's own tools (a token counter) is passed to ``parts``: one fold per
    meaning (per encoding, say), since answers are remembered by chunk alone.
    """

    __slots__ = ("_memo", "_part")

    def __init__(self, part: Callable[[Chunk], P] | None = None, limit: int = CHUNK_LIMIT) -> None:
        self._part = part
        self._memo: ObjectMemo[P] = ObjectMemo(limit)

    def parts(self, messages: Sequence[Message], part: Callable[[Chunk], P] | None = None) -> list[P]:
        get_or = self._memo.get_or
        compute = part or self._part
        assert compute is not None, "a fold made without a part needs one per call"
        return [get_or(chunk, compute) for chunk in chunks(messages)]

    def clear(self) -> None:
        self._memo.clear()

    def known(self, messages: Sequence[Message]) -> list[tuple[Chunk, P | None]]:
        """The history's chunks, each with its remembered answer or None: nothing is computed or remembered
        (a caller that can do with less than the answer, a bound say, makes do for the rest)."""
        get = self._memo.get
        return [(chunk, get(chunk)) for chunk in chunks(messages)]


class FoldPerKey(Generic[P]):
    """A ``HistoryFold`` per key (an encoding, say), for a question whose answer depends on it:
    answers are remembered by chunk alone, so two meanings must not share a fold."""

    __slots__ = ("_folds",)

    def __init__(self) -> None:
        self._folds: dict[str, HistoryFold[P]] = {}

    def __getitem__(self, key: str) -> HistoryFold[P]:
        fold = self._folds.get(key)
        if fold is None:
            fold = self._folds.setdefault(key, HistoryFold())
        return fold

    def clear(self) -> None:
        self._folds.clear()


def index_fold(predicate: Callable[[Message], Any]) -> Callable[[Sequence[Message]], tuple[int, ...]]:
    """``messages -> indices where predicate(message)``, remembered per chunk."""

    def part(chunk: Chunk) -> tuple[int, ...]:
        start = chunk.start
        return tuple(start + i for i, m in enumerate(chunk.messages) if predicate(m))

    fold: HistoryFold[tuple[int, ...]] = HistoryFold(part)

    def indices(messages: Sequence[Message]) -> tuple[int, ...]:
        if len(messages) <= CHUNK:
            return tuple(i for i, m in enumerate(messages) if predicate(m))
        return tuple(chain.from_iterable(fold.parts(messages)))

    return indices


def union(parts: Iterable[frozenset[str]]) -> frozenset[str]:
    return frozenset().union(*parts)
