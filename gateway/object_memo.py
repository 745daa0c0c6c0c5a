"""Remember a fact about an object across requests, keyed by the object's identity.

A resent history is made of the same message objects turn after turn (see
``gateway.sessions.resent``), so what a request learns about a message (its token count,
its content hash, the stub that replaces it) holds on the next turn: a look-up by ``id()``
is ~50 ns, where recomputing costs microseconds per message and milliseconds per long
history. Each entry holds its object, so an id cannot be reused by another object while
the entry lives; the memo is cleared whole when full, which bounds the memory it keeps
alive (mostly objects that live requests and the resent-history caches hold anyway).
"""

from __future__ import annotations

import operator
import weakref
from collections.abc import Callable, Sequence
from typing import Any, Generic, TypeVar

V = TypeVar("V")

#: Entries per memo: ~35 conversations of 300 messages. The memos mostly hold the same message
#: objects (the ones ``sessions.resent`` keeps), but each is cleared on its own schedule, so the
#: bound on what they keep alive together is a few times this many messages.
DEFAULT_LIMIT = 10_000


def same_objects(a: Sequence[Any], b: Sequence[Any]) -> bool:
    """Whether ``a`` and ``b`` hold the very same objects in the same order (a resent history's test: equal
    values in new objects are not the same, since what is remembered about an object is keyed by its identity)."""
    return len(a) == len(b) and all(map(operator.is_, a, b))


class ObjectMemo(Generic[V]):
    """``id(obj) -> (obj, value)``; safe to share between threads (each step is one dict operation)."""

    __slots__ = ("_entries", "limit")

    def __init__(self, limit: int = DEFAULT_LIMIT) -> None:
        self.limit = limit
        self._entries: dict[int, tuple[Any, V]] = {}

    def get(self, obj: Any) -> V | None:
        found = self._entries.get(id(obj))
        if found is not None and found[0] is obj:
            return found[1]
        return None

    def put(self, obj: Any, value: V) -> V:
        entries = self._entries
        if len(entries) >= self.limit:
            entries.clear()
        entries[id(obj)] = (obj, value)
        return value

    def get_or(self, obj: Any, compute: Callable[[Any], V]) -> V:
        found = self._entries.get(id(obj))
        if found is not None and found[0] is obj:
            return found[1]
        return self.put(obj, compute(obj))

    def __len__(self) -> int:
        return len(self._entries)

    def clear(self) -> None:
        self._entries.clear()


K = TypeVar("K")


class WeakMemo(Generic[K, V]):
    """``id(obj) -> (weak ref, value)``: a fact about an object for as long as it lives, never keeping it
    alive (a request's ``Forwarded`` carries its bodies: holding it would hold them). An entry leaves with
    its object, so an id another object takes later finds nothing."""

    __slots__ = ("_entries",)

    def __init__(self) -> None:
        self._entries: dict[int, tuple[weakref.ref[K], V]] = {}

    def get(self, obj: K) -> V | None:
        found = self._entries.get(id(obj))
        return found[1] if found is not None and found[0]() is obj else None

    def put(self, obj: K, value: V) -> V:
        key, entries = id(obj), self._entries
        entries[key] = (weakref.ref(obj, lambda _: entries.pop(key, None)), value)
        return value

    def pop(self, obj: K) -> V | None:
        found = self._entries.pop(id(obj), None)
        return found[1] if found is not None and found[0]() is obj else None
