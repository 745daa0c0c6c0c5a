"""Retention of the shared session state: idle sessions and old claims go with old requests.

``ventana prune`` calls this with the same cutoff as the requests it deletes, so the
``session_states`` and ``session_claims`` tables stay bounded in a long-running fleet.
"""

from __future__ import annotations

from typing import cast

from sqlalchemy import Table, delete
from sqlalchemy.engine import Engine

from gateway.store.models import SessionClaim, SessionStateRow

session_states = cast(Table, SessionStateRow.__table__)
session_claims = cast(Table, SessionClaim.__table__)


def forget_sessions(engine: Engine, cutoff: float) -> int:
    """Delete session states untouched since ``cutoff`` and claims made before it; return the states deleted.

    An active session keeps its checkpoints in its own state, so dropping its old claims
    loses nothing it still uses; a session idle past the cutoff starts afresh.
    """
    with engine.begin() as conn:
        conn.execute(delete(session_claims).where(session_claims.c.created_at < cutoff))
        result = conn.execute(delete(session_states).where(session_states.c.updated_at < cutoff))
    return int(result.rowcount or 0)
