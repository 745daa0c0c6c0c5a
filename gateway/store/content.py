"""Content addressing: one canonical byte form per JSON value, and its sha256.

Agents resend their whole history every turn, so the store keeps each distinct
message (and each tool list) once, under the hash of its canonical JSON, and a request
points at an ordered chain of those hashes. ``canonical_json`` is the identity of stored
content: changing it changes every hash, so stored content would stop deduplicating
against new content. Keys are sorted, separators are compact, text stays UTF-8.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Sequence
from typing import Any

import orjson

#: The parent of the first message of a chain.
ROOT = ""


def canonical_json(value: Any) -> bytes:
    """Serialise ``value`` the one way the store hashes it (sorted keys, compact, UTF-8).

    >>> canonical_json({"role": "user", "content": "hi"})
    b'{"content":"hi","role":"user"}'
    """
    try:
        return orjson.dumps(value, option=orjson.OPT_SORT_KEYS | orjson.OPT_NON_STR_KEYS)
    except TypeError:
        # Integers past 64 bits are valid JSON that orjson refuses; the standard library
        # gives the same bytes for everything else, so hashes stay comparable.
        return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


def content_hash(data: bytes) -> str:
    """The address of canonical bytes: sha256, hex."""
    return hashlib.sha256(data).hexdigest()


def node_hash(parent: str, message: str) -> str:
    """The address of a message list: the list before it (``parent``) plus one message.

    Like a git commit, a node names its whole history, so a request references its
    ordered message list by one hash, and two requests that share a prefix share the
    nodes of that prefix.
    """
    return hashlib.sha256(f"{parent}:{message}".encode()).hexdigest()


def chain(message_hashes: Sequence[str]) -> list[tuple[str, str, str]]:
    """The ``(node, parent, message)`` triples of an ordered list of message hashes.

    >>> [n[1] for n in chain(["a", "b"])][0] == ROOT
    True
    """
    out: list[tuple[str, str, str]] = []
    parent = ROOT
    for message in message_hashes:
        node = node_hash(parent, message)
        out.append((node, parent, message))
        parent = node
    return out


def head(message_hashes: Iterable[str]) -> str:
    """The node hash naming the whole ordered list (``ROOT`` for an empty list)."""
    parent = ROOT
    for message in message_hashes:
        parent = node_hash(parent, message)
    return parent
