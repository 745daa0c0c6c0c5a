"""Parse only what is new in a request body whose history the gateway parsed last turn.

An agent resends its whole conversation every turn, serialised the same way, so this
turn's body starts with the bytes of last turn's body up to (at least) the end of its last
message. Parsing 400 KB of JSON costs ~0.4 ms and checking every message another ~0.2 ms,
for a history that was parsed and checked a second ago. ``IncrementalParser`` remembers,
per caller and opening bytes, the last bodies seen: their bytes, their parsed messages and
where each message ends in those bytes. When a new body starts with the same bytes through the
end of message ``k``, messages ``0..k`` are last turn's objects and only the rest is parsed:
the opening up to ``"messages":[`` followed by what comes after message ``k``.

Why that is exact: a JSON parser reads left to right, so identical bytes up to the end of a
message parse to an identical value. The fast path is taken only when the body is laid out
the way it can be reasoned about: only plain scalars come before ``messages`` (as the
OpenAI SDK writes ``model`` and ``stream``), messages are written
compactly (each one is exactly its compact serialisation, commas between), and no
``"messages"`` text follows the recognised part (a duplicate key would win). Anything else
is parsed whole, so a body this cannot vouch for costs what it always did.

What follows the messages (the tools, the parameters) is resent unchanged too, and for an agent it is
often most of what is not history (a coding agent's tool list is tens of KB). When a body ends with the
bytes that followed last turn's messages, those bytes are not parsed again: they follow a complete
value in the messages array both times, so they parse to the same entries, and last turn's objects
stand for them (``_Body.tail``).
"""

from __future__ import annotations

import re
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

import orjson

#: Bytes of a body's opening that group its entries (model, flags, the system prompt's start),
#: per caller; the conversations sharing an opening are told apart by their bytes.
PROBE_BYTES = 64
#: Conversations remembered per opening (an app's concurrent sessions share one).
CANDIDATES = 8
#: Bodies remembered, and the bytes they may add up to (their parsed messages are shared with
#: ``sessions.resent``, so the bytes are what this adds).
DEFAULT_ENTRIES = 512
DEFAULT_MAX_BYTES = 16 * 1024 * 1024

#: The opening up to the messages array: any keys before it must hold plain scalars (the
#: OpenAI SDK writes ``model`` and ``stream`` first), so the ``"messages"`` found is top-level.
_SCALAR = rb'(?:"(?:[^"\\]|\\.)*"|-?[0-9][0-9.eE+-]*|true|false|null)'
_OPENING = re.compile(rb'\s*\{(?:\s*"[A-Za-z_]+"\s*:\s*' + _SCALAR + rb"\s*,)*" + rb'\s*"messages"\s*:\s*\[')
_MESSAGES_KEY = b'"messages"'


@dataclass(slots=True, eq=False)  # compared by identity: a body is one remembered request
class _Body:
    raw: bytes
    view: memoryview
    start: int  # offset of the first message (just after ``[``)
    ends: list[int]  # offset just past each message's closing brace
    messages: list[Any]
    tools: Any  # the body's ``tools`` as checked: an equal list in the next turn's body is swapped for it
    #: The bytes from the messages array's ``]`` to the body's end, and the entries they parse to (last turn's
    #: objects), when every message was recognised and those bytes name no key the opening names too.
    tail: bytes | None = None
    after: tuple[tuple[str, Any], ...] = ()

    @property
    def size(self) -> int:
        return len(self.raw) + (len(self.tail) if self.tail is not None else 0)


class IncrementalParser:
    """Remembers recent bodies; parses a new body's recognised history by reference. Loop-only."""

    def __init__(self, entries: int = DEFAULT_ENTRIES, max_bytes: int = DEFAULT_MAX_BYTES) -> None:
        self.entries = entries
        self.max_bytes = max_bytes
        self._bytes = 0
        self._count = 0
        self._groups: OrderedDict[tuple[str, bytes], list[_Body]] = OrderedDict()
        self._used: _Body | None = None  # the body ``parse`` reused, for the ``remember`` that follows
        self._tail_reused = False  # and whether its tail stood for this body's
        self._probed: tuple[bytes, str, _Body | None, int] | None = None  # what ``new_bytes`` just found

    def _best(self, raw: bytes, caller: str) -> tuple[_Body | None, int]:
        """The remembered body ``raw`` shares the most messages with, and how many."""
        best, shared = None, 0
        for candidate in self._groups.get((caller, raw[:PROBE_BYTES]), ()):
            n = _shared_messages(raw, candidate)
            if n > shared:
                best, shared = candidate, n
                if n == len(candidate.ends):
                    break
        return best, shared

    def new_bytes(self, raw: bytes, caller: str) -> int:
        """How many bytes of ``raw`` a ``parse`` would parse (past the messages it can reuse).

        A ``parse`` of the same body right after uses what this found (comparing a resent
        105K-token body with the remembered one is a ~0.4 MB memcmp).
        """
        best, shared = self._best(raw, caller)
        self._probed = (raw, caller, best, shared)
        return len(raw) - (best.ends[shared - 1] if best is not None else 0)

    def parse(self, raw: bytes, caller: str) -> tuple[Any, int]:
        """``(orjson.loads(raw), n)``, where the first ``n`` messages are last turn's (checked) objects.

        Raises orjson.JSONDecodeError exactly when ``orjson.loads(raw)`` would.
        """
        self._used, self._tail_reused = None, False
        probed, self._probed = self._probed, None
        if probed is not None and probed[0] is raw and probed[1] == caller:
            best, shared = probed[2], probed[3]
        else:
            best, shared = self._best(raw, caller)
        if best is not None:
            with_tail = _reuse_with_tail(raw, best, shared)
            if with_tail is not None:
                self._used, self._tail_reused = best, True
                return with_tail
            reused = _reuse(raw, best, shared)
            if reused is not None:
                self._used = best
                _same_tools(reused[0], best)
                return reused
        return orjson.loads(raw), 0

    def vouches_tools(self, body: Any) -> bool:
        """Whether ``body`` (from the last ``parse``) carries the tool list a previous turn checked, as
        that same object: an agent resends its tools unchanged, and checking 20 of them is ~50 us."""
        used = self._used
        return used is not None and used.tools is not None and body.get("tools") is used.tools

    def remember(self, raw: bytes, caller: str, body: Any, reused: int, layout: Layout | None = None) -> None:
        """Keep ``body`` (parsed from ``raw`` by the last ``parse``, checked valid) for the next turn.

        It replaces the body it reused (the same conversation, a turn later), whose offsets
        for the first ``reused`` messages still hold. Kept only if its layout allows. A body
        parsed whole elsewhere (``reused`` 0, not by ``parse``) may bring its ``layout``,
        worked out in a worker thread, since finding a long new body's message ends is
        ~3 us a message.
        """
        used, self._used = self._used, None
        tail_reused, self._tail_reused = self._tail_reused, False
        if len(raw) > self.max_bytes or body.__class__ is not dict or body.get("messages").__class__ is not list:
            return
        key = (caller, raw[:PROBE_BYTES])
        group = self._groups.pop(key, [])
        if used is not None and any(b is used for b in group):
            group = [b for b in group if b is not used]
            self._forget(used)
        messages: list[Any] = body["messages"]
        if reused and used is not None:
            start, ends = message_ends(raw, messages, used.start, used.ends[:reused])
        else:
            start, ends = layout if layout is not None else message_ends(raw, messages)
        if ends:
            entry = _Body(raw, memoryview(raw), start, ends, messages[: len(ends)], body.get("tools"))
            if len(ends) == len(messages):
                if tail_reused and used is not None and used.tail is not None and raw.endswith(used.tail):
                    entry.tail, entry.after = used.tail, used.after  # the same bytes: the same entries
                else:
                    entry.tail, entry.after = _tail(raw, start, ends[-1], body)
            group.insert(0, entry)
            self._bytes += entry.size
            self._count += 1
            while len(group) > CANDIDATES:
                self._forget(group.pop())
        if group:
            self._groups[key] = group
        while self._groups and (self._count > self.entries or self._bytes > self.max_bytes):
            for old in self._groups.popitem(last=False)[1]:
                self._forget(old)

    def _forget(self, body: _Body) -> None:
        self._bytes -= body.size
        self._count -= 1

    def __len__(self) -> int:
        return self._count


#: Where a body's messages start, and where each recognised message ends.
Layout = tuple[int, list[int]]


def message_ends(raw: bytes, messages: list[Any], start: int = -1, known: list[int] | None = None) -> Layout:
    """Where the messages of ``raw`` (parsed as ``messages``) end, as far as each is its compact
    serialisation; ``known`` ends of the first messages may be given with their ``start``.

    Pure: safe in a worker thread.
    """
    ends = list(known or ())
    if not ends:
        opening = _OPENING.match(raw)
        start = opening.end() if opening else -1
    position = ends[-1] + 1 if ends else start
    for message in messages[len(ends) :] if start >= 0 else ():
        try:
            encoded = orjson.dumps(message)
        except TypeError:
            break
        if not raw.startswith(encoded, position):
            break  # not written compactly (or not in orjson's spelling): stop recognising here
        ends.append(position + len(encoded))
        position += len(encoded) + 1
    return start, ends


def _shared_messages(raw: bytes, last: _Body) -> int:
    """How many of ``last``'s messages ``raw`` starts with, byte for byte (0 if none)."""
    ends, view = last.ends, last.view
    if raw.startswith(view[: ends[-1]]):  # the common case: the whole history resent
        return len(ends)
    lo, hi = 0, len(ends) - 1  # shared prefixes are nested: find the last end that still matches
    while lo <= hi:
        mid = (lo + hi) // 2
        if raw.startswith(view[: ends[mid]]):
            lo = mid + 1
        else:
            hi = mid - 1
    return lo


def _same_tools(body: dict[str, Any], last: _Body) -> None:
    """Swap an unchanged tool list for last turn's (checked) object: equal values, so the body parses
    the same, and every fact kept per tool object (counts, renderings, redaction) holds (as
    ``sessions.resent`` does for messages; it makes the same swap later for bodies parsed whole)."""
    tools, known = body.get("tools"), last.tools
    if known is not None and tools is not known and tools.__class__ is list and tools == known:
        body["tools"] = known


def _tail(raw: bytes, start: int, end: int, body: dict[str, Any]) -> tuple[bytes | None, tuple[tuple[str, Any], ...]]:
    """The bytes after the last message of ``raw`` (which ends at ``end``; its messages start at ``start``) and the
    entries of ``body`` they hold, if a next turn may stand last turn's objects for them: they close the messages
    array and name no ``messages``. A key of the opening they repeat stays at the opening's place with their
    value in a full parse, so the opening must parse to what ``body`` holds (only its few scalars are parsed:
    the tail was parsed once already, with the body)."""
    tail = raw[end:]
    if tail[:1] != b"]" or _MESSAGES_KEY in tail:
        return None, ()
    try:
        opening = orjson.loads(raw[:start] + b"]}")
    except orjson.JSONDecodeError:
        return None, ()
    if any(k not in body or orjson.dumps(body[k]) != orjson.dumps(v) for k, v in opening.items() if k != "messages"):
        return None, ()
    keys = list(body)
    return tail, tuple((k, body[k]) for k in keys[keys.index("messages") + 1 :])


def _reuse_with_tail(raw: bytes, last: _Body, shared: int) -> tuple[Any, int] | None:
    """``_reuse`` when ``raw`` also ends with the bytes that followed last turn's messages: only the messages
    between (new, or after an edit) are parsed, and last turn's objects stand for the tools and parameters.

    Exact: what is parsed is the opening, the messages between and ``]}``; in ``raw`` the same messages
    follow a complete value and a comma, so the parser reaches the tail in the state it reached it last
    turn, and the tail parsed to ``last.after`` from there (see ``_tail``). A body that does not parse this
    way goes the usual way, which raises exactly where a full parse does."""
    tail = last.tail
    if tail is None or not raw.endswith(tail):
        return None
    end = last.ends[shared - 1]
    stop = len(raw) - len(tail)
    if stop == end:
        between = b""  # no message after the shared ones
    elif stop > end + 1 and raw[end : end + 2] == b",{":
        between = raw[end + 1 : stop]
    else:
        return None
    body = _with_history(raw[: last.start] + between + b"]}", last, shared)
    if body is None:
        return None
    for key, value in last.after:
        body[key] = value
    return body, shared


def _reuse(raw: bytes, last: _Body, shared: int) -> tuple[Any, int] | None:
    end = last.ends[shared - 1]
    after = raw[end : end + 2]
    if after[:1] == b",":
        if after[1:2] != b"{":
            return None
        rest = raw[end + 1 :]
    elif after[:1] == b"]":
        rest = raw[end:]
    else:
        return None
    body = _with_history(raw[: last.start] + rest, last, shared)
    return None if body is None else (body, shared)


def _with_history(partial: bytes, last: _Body, shared: int) -> dict[str, Any] | None:
    """``partial`` (the opening, then what follows the shared messages) parsed, with last turn's first ``shared``
    messages put back in front; None when it does not parse to a body, or names ``messages`` again."""
    if partial.find(_MESSAGES_KEY, last.start) >= 0:
        return None  # a later "messages" key (or the word as a value): let the full parser decide
    try:
        body = orjson.loads(partial)
    except orjson.JSONDecodeError:
        return None  # the full parse raises the error, with the position in the client's body
    if body.__class__ is not dict or body.get("messages").__class__ is not list:
        return None
    body["messages"][:0] = last.messages[:shared]
    return body
