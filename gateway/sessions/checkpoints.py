"""Finished checkpoints stored append-only, one claim per session and range.

The session state is saved whole, last writer wins: a turn that loaded its state before
another replica added a checkpoint would drop it on save. So a checkpoint is also stored
on its own claim (``cp:<session>:<range hash>``): the process that claims the range
summarises it and stores the checkpoint as the claim's result; every turn reads the
session's finished checkpoints back and adds those its state lacks. A claim whose work
failed holds ``{"error": ...}``, so nobody waits for it again.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterable

import orjson

from gateway.assembly.context import Checkpoint
from gateway.sessions.claimed_summary import POLL_S
from gateway.sessions.protocol import SessionStore, store_call

CHECKPOINT_PREFIX = "cp:"
_ABANDONED = orjson.dumps({"error": "the preparing replica did not finish"}).decode()


def checkpoint_key(session_id: str, range_hash: str) -> str:
    return f"{CHECKPOINT_PREFIX}{session_id}:{range_hash}"


def checkpoint_result(cp: Checkpoint) -> str:
    return orjson.dumps({"checkpoint": cp.to_dict()}).decode()


def failed_result(exc: BaseException) -> str:
    return orjson.dumps({"error": f"{type(exc).__name__}: {exc}"[:300]}).decode()


def _parse(result: str | None) -> Checkpoint | None:
    data = orjson.loads(result) if result else {}
    found = data.get("checkpoint")
    return Checkpoint(**found) if isinstance(found, dict) else None


async def published_checkpoints(sessions: SessionStore, session_id: str, wait_s: float) -> list[Checkpoint]:
    """The session's finished checkpoints; those still in flight are waited for up to ``wait_s``.

    The wait is asynchronous (one store read per poll, in a worker thread for a shared store): a turn that
    waits must not hold one of the threads the preparation it waits for needs to run.
    """
    prefix = f"{CHECKPOINT_PREFIX}{session_id}:"
    deadline = time.monotonic() + wait_s
    claims = await sessions.read_claims(prefix)
    while any(r is None for r in claims.values()) and time.monotonic() < deadline:
        await asyncio.sleep(POLL_S)
        claims = await sessions.read_claims(prefix)
    for key in [k for k, r in claims.items() if r is None]:  # its preparer vanished: nobody waits again
        await store_call(sessions, sessions.finish, key, _ABANDONED)
        claims[key] = await store_call(sessions, sessions.result, key)
    return [cp for cp in map(_parse, claims.values()) if cp is not None]


def publish_checkpoints(sessions: SessionStore, session_id: str, checkpoints: Iterable[Checkpoint]) -> None:
    """Store checkpoints made in-pass; a range someone else claimed already is theirs to store."""
    for cp in checkpoints:
        key = checkpoint_key(session_id, cp.range_hash)
        if sessions.claim(key):
            sessions.finish(key, checkpoint_result(cp))
