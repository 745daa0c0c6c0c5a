"""Encode a request's new text in a worker thread when there is enough of it to stall the loop.

Counting is memoised per text, so an agent's next turn costs a few dictionary look-ups;
but the first request of a long conversation (or one carrying a big new document) brings
tens of thousands of unseen tokens, and tiktoken encodes ~7 M tokens/s here: 105K new
tokens would hold the event loop, and every other request on this worker, for ~15 ms.
tiktoken releases the GIL while it encodes, so that work goes to a thread and the loop
keeps serving; the assembly that follows finds every text already counted.

Small bodies are never inspected: below ``OFFLOAD_BODY_BYTES`` the worst case (all of it
new) encodes in about 2 ms, less than the cost of looking. Nor is a body that grew by less
than that since the same session's previous turn: agents append, so the new text is at
most the growth, and looking (a pass over the whole history) would cost more than it saves.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

from gateway.tokens import TokenCounter

#: Bodies smaller than this are counted on the loop (worst case ~2 ms of encoding).
OFFLOAD_BODY_BYTES = 64 * 1024
#: Unseen text (characters) from which encoding moves to a worker thread (~1 ms of work).
OFFLOAD_CHARS = 16_000


#: ``SessionState.extra`` key holding the size of the session's previous body. It lives in the session
#: state, which every worker and replica shares, so a turn on another worker knows the growth too.
BODY_BYTES_KEY = "body_bytes"


def _growth(previous_bytes: int | None, body_bytes: int) -> int:
    """Bytes the body grew by since this session's previous turn (all of it for a new session)."""
    return body_bytes - (previous_bytes or 0)


async def count_off_loop(
    counter: TokenCounter, body: Mapping[str, Any], body_bytes: int, previous_bytes: int | None = None
) -> int:
    """Pre-count the unseen texts of ``body`` in a thread when they are many; return their characters.

    ``previous_bytes``: the session's previous body size (``BODY_BYTES_KEY`` in its state), if any.
    Returns 0 when nothing was moved off the loop (small body, small growth, or little new text).
    """
    if body_bytes < OFFLOAD_BODY_BYTES or _growth(previous_bytes, body_bytes) < OFFLOAD_BODY_BYTES:
        return 0
    missing = counter.missing(body.get("messages") or (), body.get("tools"))
    chars = sum(len(text) for text in missing)
    if chars < OFFLOAD_CHARS:
        return 0
    await asyncio.to_thread(counter.learn, missing)
    return chars
