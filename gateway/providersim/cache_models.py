"""Prompt-cache accounting per provider, each following the provider's published rules.

- ``openai``: automatic exact-prefix caching; a prompt of at least 1024 tokens reads the
  longest prefix seen before, in 128-token steps (``PrefixCache``). No separate writes.
- ``anthropic``: explicit breakpoints (``cache_control`` on a tool or a message content
  block, at most 4). A breakpoint reads the longest cached prefix ending at one of the
  20 block boundaries at or before it (the lookback), and writes the prefix up to the
  last breakpoint when it is long enough (1024 tokens; 2048 for Haiku models). Reads
  and writes are reported separately (``cache_read_input_tokens`` /
  ``cache_creation_input_tokens``).
- ``vllm``: automatic prefix caching in 16-token blocks, no minimum.

A prompt is handed over as blocks (each tool, then each message) of token ids, so the
breakpoint rules can see block boundaries.
"""

from __future__ import annotations

import hashlib
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from gateway.providersim.cache import PrefixCache
from gateway.tokens import (
    IMAGE_TOKENS,
    REPLY_PRIMING,
    TOOLS_OVERHEAD,
    TokenCounter,
    message_overhead,
    message_pieces,
    render_tool,
)

ANTHROPIC_MAX_BREAKPOINTS = 4
ANTHROPIC_LOOKBACK_BLOCKS = 20
VLLM_BLOCK = 16
_OVERHEAD_ID = -1
_IMAGE_ID = -2
_MAX_ENTRIES = 1_000_000


@dataclass(frozen=True, slots=True)
class CacheResult:
    read: int = 0
    write: int = 0


@dataclass(frozen=True, slots=True)
class PromptBlocks:
    """A prompt as blocks of token ids, with the indices of blocks marked as breakpoints."""

    blocks: tuple[tuple[int, ...], ...]
    breakpoints: tuple[int, ...] = ()

    @property
    def ids(self) -> list[int]:
        return [i for block in self.blocks for i in block]


def _has_cache_control(item: Mapping[str, Any]) -> bool:
    if item.get("cache_control"):
        return True
    content = item.get("content")
    return isinstance(content, list) and any(isinstance(p, Mapping) and p.get("cache_control") for p in content)


def prompt_blocks(
    counter: TokenCounter, messages: Sequence[Mapping[str, Any]], tools: Sequence[Mapping[str, Any]] | None
) -> PromptBlocks:
    """Split a chat request into billed blocks: the tools header, each tool, each message, the priming."""
    blocks: list[tuple[int, ...]] = []
    marks: list[int] = []
    if tools:
        blocks.append((_OVERHEAD_ID,) * TOOLS_OVERHEAD)
        for tool in tools:
            blocks.append(tuple(counter.encode(render_tool(tool))))
            if _has_cache_control(tool):
                marks.append(len(blocks) - 1)
    for message in messages:
        ids: list[int] = [_OVERHEAD_ID] * message_overhead(message)
        pieces, images = message_pieces(message)
        for piece in pieces:
            if piece:
                ids += counter.encode(piece)
        ids += [_IMAGE_ID] * (IMAGE_TOKENS * images)
        blocks.append(tuple(ids))
        if _has_cache_control(message):
            marks.append(len(blocks) - 1)
    blocks.append((_OVERHEAD_ID,) * REPLY_PRIMING)
    return PromptBlocks(tuple(blocks), tuple(marks[-ANTHROPIC_MAX_BREAKPOINTS:]))


class CacheModel(Protocol):
    name: str

    def account(self, prompt: PromptBlocks) -> CacheResult: ...


class OpenAICacheModel:
    name = "openai"

    def __init__(self) -> None:
        self._cache = PrefixCache()

    def account(self, prompt: PromptBlocks) -> CacheResult:
        return CacheResult(read=self._cache.lookup_and_store(prompt.ids))


class VLLMCacheModel:
    name = "vllm"

    def __init__(self, block: int = VLLM_BLOCK) -> None:
        self._cache = PrefixCache(block=block, minimum=0)

    def account(self, prompt: PromptBlocks) -> CacheResult:
        return CacheResult(read=self._cache.lookup_and_store(prompt.ids))


def anthropic_minimum(model: str) -> int:
    return 2048 if "haiku" in model.lower() else 1024


class AnthropicCacheModel:
    name = "anthropic"

    def __init__(self, *, minimum: int = 1024, lookback: int = ANTHROPIC_LOOKBACK_BLOCKS) -> None:
        self.minimum = minimum
        self.lookback = lookback
        self._entries: OrderedDict[bytes, None] = OrderedDict()

    def account(self, prompt: PromptBlocks) -> CacheResult:
        if not prompt.breakpoints:
            return CacheResult()
        hashes, ends = _boundary_hashes(prompt.blocks)
        read = 0
        for bp in prompt.breakpoints:
            for j in range(bp, max(-1, bp - self.lookback), -1):
                if hashes[j] in self._entries:
                    read = max(read, ends[j])
                    break
        last = prompt.breakpoints[-1]
        write = 0
        if ends[last] >= self.minimum:
            write = max(0, ends[last] - read)
            for bp in prompt.breakpoints:
                if ends[bp] >= self.minimum:
                    self._entries[hashes[bp]] = None
                    self._entries.move_to_end(hashes[bp])
        while len(self._entries) > _MAX_ENTRIES:
            self._entries.popitem(last=False)
        return CacheResult(read=read, write=write)


def _boundary_hashes(blocks: Sequence[Sequence[int]]) -> tuple[list[bytes], list[int]]:
    h = hashlib.sha256()
    hashes: list[bytes] = []
    ends: list[int] = []
    total = 0
    for block in blocks:
        h.update(str(list(block)).encode())
        total += len(block)
        hashes.append(h.copy().digest())
        ends.append(total)
    return hashes, ends


def cache_model_for(kind: str, model: str = "") -> CacheModel:
    """A fresh cache for a provider kind: ``openai``, ``anthropic`` or ``vllm``."""
    if kind == "anthropic":
        return AnthropicCacheModel(minimum=anthropic_minimum(model))
    if kind == "vllm":
        return VLLMCacheModel()
    if kind == "openai":
        return OpenAICacheModel()
    raise ValueError(f"unknown cache model {kind!r}; expected openai, anthropic or vllm")


def default_kind(model: str) -> str:
    """Guess a model's cache kind from its name (``claude`` -> anthropic, else openai)."""
    return "anthropic" if "claude" in model.lower() or model.startswith("anthropic/") else "openai"
