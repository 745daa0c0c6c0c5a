"""Normalise the usage block across providers so cached tokens are always in one place.

OpenAI reports ``prompt_tokens_details.cached_tokens``; Anthropic (through litellm)
``cache_read_input_tokens`` and ``cache_creation_input_tokens``; some OpenAI-compatible
servers a top-level ``cached_tokens``. Clients and the store always see
``usage.prompt_tokens_details.cached_tokens``.

Local inference servers report the compute behind those tokens as well: llama.cpp's ``timings``
(beside ``usage``, in the answer or the last chunk) gives ``prompt_n``, the prompt tokens it actually
evaluated, and ``cache_n``, those it reused from its KV cache. They are kept apart from the provider's
billed figures (``None`` when the server does not say), so a page can show the compute a stable prefix
saved without pretending a billing provider said it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class Usage:
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_tokens: int = 0
    cache_write_tokens: int = 0
    #: Prompt tokens the engine evaluated / reused from its KV cache (llama.cpp ``timings``), when reported.
    evaluated_tokens: int | None = None
    reused_tokens: int | None = None

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens


def _int(value: Any) -> int:
    return int(value) if isinstance(value, int | float) and not isinstance(value, bool) else 0


def engine_timings(timings: Any) -> tuple[int | None, int | None]:
    """``(evaluated, reused)`` prompt tokens from llama.cpp's ``timings`` block, ``None`` where absent."""
    if not isinstance(timings, Mapping):
        return None, None
    evaluated, reused = timings.get("prompt_n"), timings.get("cache_n")
    return (
        _int(evaluated) if isinstance(evaluated, int | float) else None,
        _int(reused) if isinstance(reused, int | float) else None,
    )


def normalise_usage(usage: Mapping[str, Any] | None, timings: Any = None) -> tuple[dict[str, Any] | None, Usage]:
    """Return the usage block with ``prompt_tokens_details.cached_tokens`` filled, and its numbers.

    ``timings`` is the engine's block beside ``usage`` (llama.cpp), when the upstream sent one."""
    evaluated, reused = engine_timings(timings)
    if not isinstance(usage, Mapping):
        return None, Usage(evaluated_tokens=evaluated, reused_tokens=reused)
    details = usage.get("prompt_tokens_details")
    details = dict(details) if isinstance(details, Mapping) else {}
    cached = _int(details.get("cached_tokens"))
    if not cached:
        cached = _int(usage.get("cache_read_input_tokens")) or _int(usage.get("cached_tokens"))
    writes = _int(usage.get("cache_creation_input_tokens")) or _int(details.get("cache_write_tokens"))
    out = dict(usage)
    details["cached_tokens"] = cached
    out["prompt_tokens_details"] = details
    return out, Usage(
        prompt_tokens=_int(usage.get("prompt_tokens")),
        completion_tokens=_int(usage.get("completion_tokens")),
        cached_tokens=cached,
        cache_write_tokens=writes,
        evaluated_tokens=evaluated,
        reused_tokens=reused,
    )
