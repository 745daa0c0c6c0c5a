"""Prompt-cache accounting as OpenAI documents it: exact prefixes, 1024-token minimum, 128-token steps.

The prompt is turned into the token sequence the model is billed for (tools first,
then each message with its fixed overhead, see ``gateway.tokens``). Every 128-token
block boundary is remembered by a chained hash; a later prompt's cached tokens are
the longest remembered prefix, reported only when the prompt is at least 1024 tokens.
"""

from __future__ import annotations

import hashlib
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from typing import Any

from gateway.tokens import (
    TokenCounter,
)

BLOCK = 128
MINIMUM = 1024
_MAX_ENTRIES = 2_000_000


def prompt_token_ids(
    counter: TokenCounter, messages: Sequence[Mapping[str, Any]], tools: Sequence[Mapping[str, Any]] | None
) -> list[int]:
    """The billed token sequence of a chat request (markers stand in for special tokens)."""
    from gateway.providersim.cache_models import prompt_blocks

    return prompt_blocks(counter, messages, tools).ids


def _block_hashes(ids: Sequence[int], block: int) -> list[bytes]:
    hashes: list[bytes] = []
    h = hashlib.sha256()
    for end in range(block, len(ids) + 1, block):
        h.update(str(ids[end - block : end]).encode())
        hashes.append(h.copy().digest())
    return hashes


class PrefixCache:
    """Remembers prompt prefixes in ``block``-token steps; thread-unsafe, one per process."""

    def __init__(self, *, block: int = BLOCK, minimum: int = MINIMUM) -> None:
        self.block = block
        self.minimum = minimum
        self._seen: OrderedDict[bytes, None] = OrderedDict()

    def lookup_and_store(self, ids: Sequence[int]) -> int:
        """Return the cached tokens for this prompt, then remember its prefixes."""
        if len(ids) < self.minimum:
            return 0
        hashes = _block_hashes(ids, self.block)
        hit = 0
        for i, digest in enumerate(hashes):
            if digest in self._seen:
                hit = (i + 1) * self.block
            else:
                break
        for digest in hashes:
            self._seen[digest] = None
            self._seen.move_to_end(digest)
        while len(self._seen) > _MAX_ENTRIES:
            self._seen.popitem(last=False)
        return hit if hit >= self.minimum else 0
