"""Merge a save into a session state another turn changed meanwhile: no update is lost.

A turn loads its session's state, assembles (which may take a while: a summariser, a thread),
and saves. Meanwhile another turn of the same session, on this worker or another replica, may
have saved too, or ``find_tools`` may have grown the tool set mid-request. Saving the whole
state would drop what they wrote. So a save names the state it started from (``base``): when
the stored state is no longer that one, each field this save did not change keeps the stored
value, and each field it changed takes its own (the per-key entries of ``extra`` alike). Two
saves that change the same field: the later wins that field only.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from gateway.assembly.context import SessionState

_FIELDS = ("volatile_spans", "previous_system", "tool_set", "tool_set_changes", "checkpoints", "previous_prefix")
_GONE = object()


def merge_states(base: SessionState, mine: SessionState, theirs: SessionState) -> SessionState:
    """``mine`` (made from ``base``) applied onto ``theirs`` (what is stored now); carries ``theirs.version``."""
    changes: dict[str, Any] = {f: getattr(mine, f) for f in _FIELDS if getattr(mine, f) != getattr(base, f)}
    if mine.turn != base.turn:
        changes["turn"] = max(mine.turn, theirs.turn)
    extra = dict(theirs.extra)
    for key in {*base.extra, *mine.extra}:
        ours = mine.extra.get(key, _GONE)
        if ours == base.extra.get(key, _GONE):
            continue
        if ours is _GONE:
            extra.pop(key, None)
        else:
            extra[key] = ours
    return replace(theirs, **changes, extra=extra)
