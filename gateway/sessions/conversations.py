"""Tell apart conversations that open alike: a request belongs to the conversation it extends.

Without ``X-Session-Id`` a session is first named by what its opening says (``identify.py``: the
caller, model, system prompt and first user message). Two scripts that both open with "Hello
there" get that same name, and before this module they shared one session: one's sticky tool
set, checkpoints and recalled passages served the other.

A client resends its whole history, so each request's messages extend the messages of the
conversation's previous request. The index remembers, per caller, a digest of every request's
message list (a chain: each message's digest folded into the previous one's) with the session it
was served under, and for each session the newest list it served. A new request is named by the
longest of its own prefixes the index knows:

- none: a new conversation, under its opening's name;
- one whose session's newest list is also a prefix of this request: the same conversation,
  continued (a retry resends the newest list itself);
- one whose session has since gone elsewhere: the two diverged here, so this request starts a
  session of its own, named after the opening and the first message where they part.

What a caller's requests look like is that caller's own: the index is keyed by caller, and it
is bounded (the oldest digests are forgotten first; a forgotten conversation continues under
its opening's name, as before).

With a shared session store (``session_state: database``, which ``--workers N`` switches on) the
index lives in the store, so every worker and replica names a request as one process would: each
request's chain digest is remembered under ``conv:<digest>`` (an append-only claim: a message list
belongs to the session that first served it), and each request's list under
``convnew:<hash of caller and session>:<time>`` (claims are append-only, so the session's newest
list is its latest such row). A request then costs one worker-thread hop: a read of
its chain's newest digests, one of the found session's newest list, and one insert of two rows.
"""

from __future__ import annotations

import hashlib
import threading
import time
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from typing import Any

import orjson

from gateway.object_memo import ObjectMemo
from gateway.sessions.protocol import SessionStore, store_call

CONV_PREFIX = "conv:"
#: Digests looked up first in the shared index (the newest end of the request's chain).
RECENT_FIRST = 16
NEWEST_PREFIX = "convnew:"
#: Message lists remembered across all callers (each entry is ~100 bytes).
DEFAULT_LIMIT = 200_000
#: Callers whose previous request's messages are kept to extend their chain (they are alive anyway
#: in the resent-history cache while the conversation goes on).
MAX_CALLERS_REMEMBERED = 1024


def _newest_prefix(caller: str, session: str) -> str:
    """The claims holding a session's message lists by length (a hash: names and callers are long)."""
    key = hashlib.blake2b(f"{caller}\x00{session}".encode("utf-8", "surrogatepass"), digest_size=16).hexdigest()
    return f"{NEWEST_PREFIX}{key}:"


def _name_in_store(store: SessionStore, caller: str, opening: str, chain: list[bytes]) -> str:
    """``name``'s decision against the shared index (blocking: one worker-thread hop for all of it).

    The list a request extends is nearly always its conversation's previous request, a few
    messages shorter, so the newest digests are looked up first and the rest only on a miss."""
    keys = [CONV_PREFIX + d.hex() for d in chain]
    recent = keys[-RECENT_FIRST:]
    known = store.remembered(recent)
    if not known and len(keys) > len(recent):
        known = store.remembered(keys[: -len(recent)])
    found = next((known[k] for k in reversed(keys) if k in known), None)
    session = opening
    if found is not None:
        session = found
        newest = store.newest(_newest_prefix(caller, found))  # keys end in the time they were written
        if newest is not None:
            length, _, digest = newest.partition(":")
            if int(length) > len(chain) or chain[int(length) - 1].hex() != digest:
                session = f"{opening}-{chain[-1].hex()[:12]}"  # it went on along another branch: parts here
    newest_key = f"{_newest_prefix(caller, session)}{time.time_ns():020d}"
    store.remember({keys[-1]: session, newest_key: f"{len(chain)}:{chain[-1].hex()}"})
    return session


def _message_digest(message: Mapping[str, Any]) -> bytes:
    return hashlib.blake2b(orjson.dumps(message, option=orjson.OPT_SORT_KEYS), digest_size=16).digest()


class ConversationIndex:
    """Which session a headerless request continues; safe to call from several threads."""

    def __init__(self, limit: int = DEFAULT_LIMIT) -> None:
        self.limit = limit
        self._lock = threading.Lock()
        self._sessions: OrderedDict[bytes, str] = OrderedDict()  # chain digest -> session name
        self._newest: dict[tuple[str, str], tuple[int, bytes]] = {}  # (caller, session) -> (length, digest)
        self._digests: ObjectMemo[bytes] = ObjectMemo()  # a resent message is last turn's object
        #: caller -> its previous request's message objects and their chain: a turn hashes only what is new
        self._previous: OrderedDict[str, tuple[list[Mapping[str, Any]], list[bytes]]] = OrderedDict()

    def _chain(self, caller: str, messages: Sequence[Mapping[str, Any]]) -> list[bytes]:
        """The digest of ``messages[:k + 1]`` for every k, scoped by the caller.

        The parsed messages a client resends are the previous turn's objects (``sessions.resent``),
        so the chain is taken over from the caller's previous request up to the first new object."""
        known, chain = self._previous.get(caller, ((), []))
        k, n = 0, min(len(known), len(messages))
        while k < n and known[k] is messages[k]:
            k += 1
        out = chain[:k]
        h = out[-1] if out else hashlib.blake2b(caller.encode("utf-8", "surrogatepass"), digest_size=16).digest()
        for message in messages[k:]:
            h = hashlib.blake2b(h + self._digests.get_or(message, _message_digest), digest_size=16).digest()
            out.append(h)
        self._previous[caller] = (list(messages), out)
        self._previous.move_to_end(caller)
        while len(self._previous) > MAX_CALLERS_REMEMBERED:
            self._previous.popitem(last=False)
        return out

    async def name(
        self, caller: str, opening: str, messages: Sequence[Mapping[str, Any]], store: SessionStore | None = None
    ) -> str:
        """The session these messages continue, ``opening`` (their opening's name) for a new one.

        ``store``: a shared session store keeps the index for every process sharing it."""
        if store is not None and store.blocking:
            return await self._name_shared(store, caller, opening, messages)
        return self.name_local(caller, opening, messages)

    async def _name_shared(
        self, store: SessionStore, caller: str, opening: str, messages: Sequence[Mapping[str, Any]]
    ) -> str:
        with self._lock:
            chain = self._chain(caller, messages)
        if not chain:
            return opening
        return await store_call(store, _name_in_store, store, caller, opening, chain)

    def name_local(self, caller: str, opening: str, messages: Sequence[Mapping[str, Any]]) -> str:
        """``name`` in this process's own index."""
        with self._lock:
            chain = self._chain(caller, messages)
            found = next((self._sessions[d] for d in reversed(chain) if d in self._sessions), None)
            if found is None:
                session = opening
            else:
                session = found
                newest = self._newest.get((caller, session))
                continued = newest is not None and newest[0] <= len(chain) and chain[newest[0] - 1] == newest[1]
                if not continued:  # the session went on along another branch: this one parts here
                    session = f"{opening}-{chain[-1].hex()[:12]}"
            self._remember(caller, session, chain)
        return session

    def _remember(self, caller: str, session: str, chain: list[bytes]) -> None:
        if not chain:
            return
        self._sessions[chain[-1]] = session
        self._sessions.move_to_end(chain[-1])
        self._newest[(caller, session)] = (len(chain), chain[-1])
        while len(self._sessions) > self.limit:
            self._sessions.popitem(last=False)
        if len(self._newest) > self.limit:
            self._newest.clear()  # rare: conversations then continue under their openings' names
