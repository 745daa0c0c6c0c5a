"""Per-caller request rate limiting: one token bucket per caller hash.

A bucket holds up to ``burst`` tokens (default: the per-minute rate) and refills at
``requests_per_minute / 60`` tokens a second; each admitted request takes one. A caller
with an empty bucket gets 429 in the OpenAI shape with ``retry-after`` set to the whole
seconds until a token is back, so well-behaved SDKs (the openai SDK honours
``retry-after``) wait exactly long enough.

The buckets live in the process: with ``--workers N`` each worker limits on its own,
so the effective limit is up to N times the configured one (a shared Redis bucket is
the follow-up). Memory is bounded: past ``max_callers`` buckets, full (idle) buckets
are forgotten first, then the least recently used.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable

from gateway.config import LimitsConfig
from gateway.errors import RateLimited

DEFAULT_MAX_CALLERS = 100_000


class RateLimiter:
    def __init__(
        self,
        *,
        per_minute: int,
        burst: int | None = None,
        clock: Callable[[], float] = time.monotonic,
        max_callers: int = DEFAULT_MAX_CALLERS,
    ) -> None:
        if per_minute <= 0:
            raise ValueError(f"per_minute must be positive, found {per_minute}")
        self.per_minute = per_minute
        self.capacity = float(burst or per_minute)
        self.rate = per_minute / 60.0  # tokens per second
        self._clock = clock
        self._max_callers = max_callers
        self._buckets: dict[str, tuple[float, float]] = {}  # caller -> (tokens, at)

    @classmethod
    def from_config(cls, limits: LimitsConfig) -> RateLimiter | None:
        """The limiter ``limits`` asks for, or None when ``requests_per_minute`` is unset."""
        if limits.requests_per_minute is None:
            return None
        return cls(per_minute=limits.requests_per_minute, burst=limits.rate_burst)

    def take(self, caller: str) -> float:
        """Take a token for ``caller``; return 0 when admitted, else the seconds until one is free."""
        now = self._clock()
        tokens = self._tokens(caller, now)
        if tokens >= 1.0:
            self._store(caller, tokens - 1.0, now)
            return 0.0
        self._store(caller, tokens, now)
        return (1.0 - tokens) / self.rate

    def admit(self, caller: str) -> None:
        """Admit one request from ``caller`` or raise RateLimited (429 with retry-after)."""
        wait = self.take(caller)
        if wait <= 0:
            return
        retry_after = max(1, math.ceil(wait))
        raise RateLimited(
            f"rate limit of {self.per_minute} requests per minute reached for this key; retry in {retry_after}s",
            headers={
                "retry-after": str(retry_after),
                "x-ratelimit-limit-requests": str(self.per_minute),
                "x-ratelimit-remaining-requests": "0",
            },
        )

    def _tokens(self, caller: str, now: float) -> float:
        found = self._buckets.pop(caller, None)  # re-inserted by _store: dict order is recency
        if found is None:
            return self.capacity
        tokens, at = found
        return min(self.capacity, tokens + max(0.0, now - at) * self.rate)

    def _store(self, caller: str, tokens: float, now: float) -> None:
        self._buckets[caller] = (tokens, now)
        if len(self._buckets) > self._max_callers:
            self._evict(now)

    def _evict(self, now: float) -> None:
        idle = [c for c, (t, at) in self._buckets.items() if t + (now - at) * self.rate >= self.capacity]
        for caller in idle:
            del self._buckets[caller]
        while len(self._buckets) > self._max_callers:
            del self._buckets[next(iter(self._buckets))]

    def __len__(self) -> int:
        return len(self._buckets)
