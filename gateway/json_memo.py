"""Memoise a function of one JSON value by the value's encoding.

Tool definitions and schemas arrive as freshly parsed dicts every turn (unhashable, new
objects), but with the same content: their plain orjson encoding is a cheap, exact key,
several times cheaper than the key-sorted rendering or the schema walk it saves. A tool
list resent unchanged is last turn's objects (``gateway.sessions.resent``), found by
identity first, without encoding.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import wraps
from typing import Any, TypeVar

import orjson

from gateway.object_memo import ObjectMemo

T = TypeVar("T")


def memo_by_json(limit: int) -> Callable[[Callable[[Any], T]], Callable[[Any], T]]:
    """Decorate ``fn(value)``; results are kept per encoding of ``value``, cleared whole past ``limit``.

    A value orjson cannot encode (an integer past 64 bits) is simply not memoised.
    """

    def decorate(fn: Callable[[Any], T]) -> Callable[[Any], T]:
        memo: dict[bytes, T] = {}
        by_object: ObjectMemo[T] = ObjectMemo(limit)

        @wraps(fn)
        def memoised(value: Any) -> T:
            found = by_object.get(value)  # the same object as last turn (``sessions.resent``)
            if found is not None:
                return found
            try:
                key = orjson.dumps(value)
            except TypeError:
                return fn(value)
            found = memo.get(key)
            if found is None:
                if len(memo) >= limit:
                    memo.clear()
                # The key is copied: orjson's result keeps its whole output buffer (~16 KB for a
                # 1 KB value), which a long-lived key would hold for as long as it is remembered.
                found = memo[bytes(memoryview(key))] = fn(value)
            return by_object.put(value, found)

        return memoised

    return decorate
