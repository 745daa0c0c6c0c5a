"""The caches a gateway keeps between requests, owned by the gateway, not by modules.

A resent history is last turn's message objects (``gateway.sessions.resent``), so what one
request worked out about a message (its prefix block, its stub, its tokens by kind) is
found again on the next turn by identity (``ObjectMemo``). Those facts that depend on the
gateway's configuration (the encoding, the policy) live here, one ``Memos`` per gateway
(``api.deps.Gateway.memos``), reached by passes as ``ctx.env.memos``: two gateways in one
process (tests, benchmarks, replay) never share them, and a gateway's shutdown frees them.
An ``Env`` built without one (a test, a one-off lint) gets fresh, empty memos.

Every value whose count depends on the encoding carries the encoding name, in its key
(``FoldPerKey``, ``BytesMemo``) or beside the value (checked on each hit). What stays at
module level is process-wide and pure: facts of an object's content alone (a digest, a
tool's document text, where the system messages are), each marked where it is declared.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import TYPE_CHECKING, Generic, TypeVar

from gateway.history_fold import FoldPerKey, HistoryFold
from gateway.object_memo import ObjectMemo

if TYPE_CHECKING:
    from gateway.assembly.clear_tool_results import _Call
    from gateway.assembly.context import Message
    from gateway.assembly.prefix import PrefixBlock, _Part
    from gateway.assembly.recall_memory import Choice

V = TypeVar("V")

#: Canonical message bytes kept by a ``BytesMemo`` before it is cleared whole.
BYTES_LIMIT = 32 << 20


class BytesMemo(Generic[V]):
    """``(encoding, canonical bytes) -> value``, bounded by the bytes it keeps; cleared whole when full.

    Finds a message again when the client re-serialised it (a new object, the same JSON)."""

    __slots__ = ("_by_encoding", "_bytes", "limit")

    def __init__(self, limit: int = BYTES_LIMIT) -> None:
        self.limit = limit
        self._by_encoding: dict[str, dict[bytes, V]] = {}
        self._bytes = 0

    def for_encoding(self, encoding: str) -> dict[bytes, V]:
        """The read side for one encoding: look values up in it directly (one dict operation)."""
        return self._by_encoding.setdefault(encoding, {})

    def put(self, encoding: str, raw: bytes, value: V) -> None:
        if self._bytes + len(raw) > self.limit:
            for per_encoding in self._by_encoding.values():
                per_encoding.clear()
            self._bytes = 0
        # An exact copy: orjson's own result keeps its ~16 KB buffer alive.
        self.for_encoding(encoding)[bytes(memoryview(raw))] = value
        self._bytes += len(raw)

    def __len__(self) -> int:
        return sum(map(len, self._by_encoding.values()))

    def clear(self) -> None:
        self._by_encoding.clear()
        self._bytes = 0


def _fold() -> FoldPerKey[dict[str, int]]:
    return FoldPerKey()


@dataclass(slots=True, eq=False)
class Memos:
    """One gateway's caches; every field is a cache (clearing it changes no result)."""

    #: ``assembly.prefix``: block per tool/message object, with its encoding and whether it was first.
    prefix_by_object: ObjectMemo[tuple[str, bool, PrefixBlock]] = field(default_factory=ObjectMemo)
    #: ``assembly.prefix``: block per encoding and canonical message bytes.
    prefix_by_bytes: BytesMemo[PrefixBlock] = field(default_factory=BytesMemo)
    #: ``assembly.prefix``: the blocks of a chunk of history, per encoding.
    prefix_parts: FoldPerKey[_Part] = field(default_factory=FoldPerKey)
    #: ``assembly.prefix``: the block keys of a chunk of history (keys do not depend on the encoding).
    prefix_keys: HistoryFold[tuple[str, ...]] = field(default_factory=HistoryFold)
    #: ``assembly.clear_tool_results``: ``tool_call_id -> call`` per assistant message.
    tool_calls: ObjectMemo[dict[str, _Call]] = field(default_factory=ObjectMemo)
    #: ``assembly.clear_tool_results``: a tool result's tokens, with the encoding counted in.
    result_tokens: ObjectMemo[tuple[str, int]] = field(default_factory=ObjectMemo)
    #: ``assembly.clear_tool_results``: a result's stub, with (tool, arguments, encoding) and its saving.
    stubs: ObjectMemo[tuple[tuple[str, str, str], Message, int]] = field(default_factory=ObjectMemo)
    #: ``assembly.input_stubs``: an assistant message with some inputs stubbed, with (ids, encoding).
    cleared_inputs: ObjectMemo[tuple[tuple[frozenset[str], str], Message]] = field(default_factory=ObjectMemo)
    #: ``assembly.budget_report``: what a message is by its content alone.
    kinds: ObjectMemo[str] = field(default_factory=ObjectMemo)
    #: ``assembly.budget_report``: tokens per kind of a chunk of history, per encoding.
    tokens_by_kind: FoldPerKey[dict[str, int]] = field(default_factory=_fold)
    #: ``assembly.recall_memory``: per candidates object (the memory edge hands a resent question the same
    #: one), the passages chosen and their block, with the messages, budget, places, threshold and encoding
    #: they were chosen for.
    recall_choices: ObjectMemo[tuple[tuple[Message, ...], tuple[int, int, float, str], Choice]] = field(
        default_factory=lambda: ObjectMemo(limit=64)
    )

    def clear(self) -> None:
        """Free everything (the gateway's shutdown); the memos stay usable."""
        for f in fields(self):
            getattr(self, f.name).clear()
