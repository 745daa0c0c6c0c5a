"""Finished checkpoints stored append-only, one claim per session and range.

The session state is saved whole, last writer wins: a turn that loaded its state before
another replica added a checkpoint would drop it on save. So a checkpoint is also stored
on its own claim (``cp:<session>:<range hash>``): the process that claims the range
summarises it and stores the checkpoint as the claim's result; every turn reads the
session's finished checkpoints back and adds those its state lacks. A claim whose work
failed holds ``{"error": ...}``, so nobody waits for it again.
"""

from __future__ import annotations

from collections.abc import Iterable

import orjson

from gateway.assembly.context import Checkpoint
from gateway.sessions.claimed_summary import wait_for_result
from gateway.sessions.protocol import SessionStore

CHECKPOINT_PREFIX = "cp:"


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


def published_checkpoints(sessions: SessionStore, session_id: str, wait_s: float) -> list[Checkpoint]:
    """The session's finished checkpoints; one still in flight is waited for up to ``wait_s``."""
    claims = sessions.claimed(f"{CHECKPOINT_PREFIX}{session_id}:")
    out: list[Checkpoint] = []
    for key, result in claims.items():
        if result is None:
            result = wait_for_result(sessions, key, wait_s)
            if result is None:  # its preparer vanished: mark it so later turns do not wait again
                sessions.finish(key, orjson.dumps({"error": "the preparing replica did not finish"}).decode())
        cp = _parse(result)
        if cp is not None:
            out.append(cp)
    return out


def publish_checkpoints(sessions: SessionStore, session_id: str, checkpoints: Iterable[Checkpoint]) -> None:
    """Store checkpoints made in-pass; a range someone else claimed already is theirs to store."""
    for cp in checkpoints:
        key = checkpoint_key(session_id, cp.range_hash)
        if sessions.claim(key):
            sessions.finish(key, checkpoint_result(cp))
