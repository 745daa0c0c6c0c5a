"""Encode a request's new text in a worker thread when there is enough of it to stall the loop.

Counting is memoised per text, so an agent's next turn costs a few dictionary look-ups;
but the first request of a long conversation (or one carrying a big new document) brings
tens of thousands of unseen tokens, and tiktoken encodes ~7 M tokens/s here: 105K new
tokens would hold the event loop, and every other request on this worker, for ~15 ms.
tiktoken releases the GIL while it encodes, so that work goes to a thread and the loop
keeps serving; the assembly that follows finds every text already counted.

Small bodies are never inspected: below ``OFFLOAD_BODY_BYTES`` the worst case (all of it
new) encodes in about 2 ms, less than the cost of looking.
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


async def count_off_loop(counter: TokenCounter, body: Mapping[str, Any], body_bytes: int) -> int:
    """Pre-count the unseen texts of ``body`` in a thread when they are many; return their characters.

    Returns 0 when nothing was moved off the loop (small body, or little new text).
    """
    if body_bytes < OFFLOAD_BODY_BYTES:
        return 0
    missing = counter.missing(body.get("messages") or (), body.get("tools"))
    chars = sum(len(text) for text in missing)
    if chars < OFFLOAD_CHARS:
        return 0
    await asyncio.to_thread(counter.learn, missing)
    return chars
