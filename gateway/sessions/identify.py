"""Name the conversation a stateless OpenAI request belongs to.

Clients resend the whole history every turn and rarely say which conversation it is.
In order: the ``X-Session-Id`` header; else the session a known client names itself
(``client_session``: the headers of ``CLIENT_SESSION_HEADERS`` such as Claude Code's and Codex's,
then Claude Code's ``metadata.user_id``, then a body field its door knows, such as Codex's
``prompt_cache_key``); else a hash of the caller's key hash, the model,
and the system prompt and first user message with their per-turn values removed (so a
clock in the system prompt does not make every turn a new session). Digit runs are
also folded, so a per-turn number no pattern knows (``worker wp37x``) keeps the session
too: that is what lets ``move_volatile`` learn it from the previous turn. Two prompts
that differ only in their numbers, from the same caller, model and first message, are
taken for one conversation; a client that needs them apart sends ``X-Session-Id``.

A session's name is what the client sees and the store records; its state (the sticky
tool set, checkpoints, claims, archived passages, the previous prefix) lives under
``scope_session(caller, name)``. The header is the client's to choose, so without the
caller in the key, key B sending key A's session id would read A's recalled passages and
frozen ``<memory>`` block and extend A's session.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping, Sequence
from functools import lru_cache
from typing import Any

import orjson

from gateway.assembly.message_text import system_indices
from gateway.assembly.volatile_patterns import strip_volatile
from gateway.object_memo import ObjectMemo, same_objects
from gateway.tokens import content_text

MAX_SESSION_ID_LENGTH = 128
#: Hex digits of the digest that ends a name too long to keep whole (``bounded_name``).
_NAME_DIGEST_HEX = 16
#: Headers in which clients name their conversation, in order of preference: the gateway's own, then
#: those agent clients send on every request of a session. Claude Code sends ``x-claude-code-session-id``;
#: Codex CLI ``session-id`` and ``thread-id`` (0.171; older releases ``session_id`` and ``conversation_id``).
#: Checked within the caller's scope, like ``X-Session-Id``: a client naming another caller's session only
#: reaches its own.
CLIENT_SESSION_HEADERS: tuple[str, ...] = (
    "x-session-id",
    "x-claude-code-session-id",
    "session-id",
    "session_id",
    "thread-id",
    "conversation_id",
    "conversation-id",
)
_DIGITS = re.compile(r"\d+")
_SESSION_IN_USER_ID = re.compile(r"session_([0-9A-Za-z-]{8,})")


# Process-wide and pure: a function of the text and the built-in patterns.
@lru_cache(maxsize=4096)
def _stable(text: str) -> str:
    """``strip_volatile`` memoised: every turn of a conversation resends the same system prompt,
    and running the patterns over it costs ~0.4 ms, the largest item of a small request."""
    return _DIGITS.sub("0", strip_volatile(text))


def bounded_name(name: str) -> str:
    """``name`` if it fits ``MAX_SESSION_ID_LENGTH`` (the store's columns), else its head and a digest of all of it.

    Cutting a long name to its first 128 characters made two names one whenever they differed only
    after that: benchmark runs named ``<run id>-16000`` and ``<run id>-8000`` (tau2's run ids are
    longer than 128) became one session, and the 8K replay recalled the 16K one's passages as "this
    conversation" and reused its summaries sized for twice the window. The digest keeps every name
    its own; the head keeps it readable."""
    if len(name) <= MAX_SESSION_ID_LENGTH:
        return name
    digest = hashlib.blake2b(name.encode("utf-8", "surrogatepass"), digest_size=_NAME_DIGEST_HEX // 2).hexdigest()
    return f"{name[: MAX_SESSION_ID_LENGTH - _NAME_DIGEST_HEX - 1]}~{digest}"


def scope_session(caller: str, session_id: str) -> str:
    """The key a session's state is kept under: the session's name inside its caller's scope.

    Bounded like a name (``bounded_name``): the caller's prefix makes a name of up to 128 characters
    longer than the columns that keep the key (``session_states``, ``memory_passages``), which
    PostgreSQL refuses. Changing it forgets every stored session state (each conversation starts
    afresh once); keys that fit are unchanged."""
    return bounded_name(f"{caller or 'anonymous'}/{session_id}")


def client_session(headers: Mapping[str, str], *fallbacks: Any, body: Mapping[str, Any] | None = None) -> str | None:
    """The session the client names, if any: the first of ``CLIENT_SESSION_HEADERS`` it sent, else the
    session id inside Claude Code's ``metadata.user_id`` in ``body`` (a JSON object with ``session_id``
    in current versions, ``user_..._account_..._session_<uuid>`` before), else the first non-empty
    string of ``fallbacks`` (a door's body field, e.g. ``prompt_cache_key``). None when the client says
    nothing: the session is then named from the request (``identify_session``)."""
    for name in CLIENT_SESSION_HEADERS:
        value = headers.get(name)
        if value and value.strip():
            return bounded_name(value.strip())
    named = _metadata_session(body) if body is not None else None
    if named:
        return bounded_name(named)
    for value in fallbacks:
        if isinstance(value, str) and value.strip():
            return bounded_name(value.strip())
    return None


def _metadata_session(body: Mapping[str, Any]) -> str | None:
    metadata = body.get("metadata")
    user = metadata.get("user_id") if isinstance(metadata, Mapping) else None
    if not isinstance(user, str) or "session" not in user:
        return None
    if user.lstrip().startswith("{"):
        try:
            found = orjson.loads(user).get("session_id")
        except (orjson.JSONDecodeError, AttributeError):
            return None
        return str(found) if isinstance(found, str | int) and str(found) else None
    match = _SESSION_IN_USER_ID.search(user)
    return match.group(1) if match else None


#: The name each opening was given, by its first user message object: an agent resends its history as the
#: previous turn's objects (``api/incremental_parse``), so a turn names its session by identity, without
#: the text, the patterns and the digest of its system prompt again (~20 us of the path before the forward
#: on the smallest request, more with a long prompt). The entry holds the objects the name was made from.
_NAMED: ObjectMemo[tuple[str, str, tuple[Mapping[str, Any], ...], str]] = ObjectMemo(limit=1024)


def identify_session(header: str | None, caller: str, model: str, messages: Sequence[Mapping[str, Any]]) -> str:
    if header:
        return bounded_name(header.strip())
    systems = tuple(messages[i] for i in system_indices(messages))
    first_user = next((m for m in messages if m.get("role") == "user"), None)
    if first_user is None:
        return _named(caller, model, systems, "")
    known = _NAMED.get(first_user)
    if known is not None and known[0] == caller and known[1] == model and same_objects(known[2], systems):
        return known[3]
    name = _named(caller, model, systems, content_text(first_user.get("content"))[0])
    _NAMED.put(first_user, (caller, model, systems, name))
    return name


def _named(caller: str, model: str, systems: tuple[Mapping[str, Any], ...], first_user: str) -> str:
    """A hash of the caller, the model, and the system prompt and first user message, their per-turn values out."""
    system = "\n".join(content_text(m.get("content"))[0] for m in systems)
    h = hashlib.sha256()
    for part in (caller, model, _stable(system), _stable(first_user)):
        h.update(part.encode("utf-8", "surrogatepass"))
        h.update(b"\x00")
    return "s-" + h.hexdigest()[:24]
