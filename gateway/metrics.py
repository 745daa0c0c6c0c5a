"""Prometheus metrics (prefix ``ventana_``); labels are bounded: model names from the config only.

With several worker processes, set ``PROMETHEUS_MULTIPROC_DIR`` (``ventana serve
--workers N`` does) and the /metrics route aggregates every worker's numbers.
"""

from __future__ import annotations

import os

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Histogram, generate_latest, multiprocess

from gateway.store.record import RequestRecord

_MS_BUCKETS = (0.25, 0.5, 1, 2, 5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000, 30000, 60000)

REQUESTS = Counter("ventana_requests_total", "Chat requests by model and HTTP status", ["model", "status"])
LATENCY_MS = Histogram("ventana_request_duration_ms", "Total request time in ms", ["model"], buckets=_MS_BUCKETS)
OVERHEAD_MS = Histogram(
    "ventana_gateway_overhead_ms",
    "Gateway time before forwarding (parse, assembly, bookkeeping) in ms",
    ["model"],
    buckets=_MS_BUCKETS,
)
TTFB_MS = Histogram("ventana_upstream_ttfb_ms", "Provider time to first byte in ms", ["model"], buckets=_MS_BUCKETS)
PROMPT_TOKENS = Counter("ventana_prompt_tokens_total", "Prompt tokens before and after assembly", ["model", "stage"])
CACHED_TOKENS = Counter("ventana_cached_tokens_total", "Prompt tokens the provider read from cache", ["model"])
LOOP_LAG_MS = Histogram(
    "ventana_event_loop_lag_ms",
    "How late the event loop woke up (only with diagnostics.loop_lag_probe_ms set), in ms",
    buckets=(0.5, 1, 2, 3, 5, 10, 25, 50, 100, 250, 1000),
)
LOOP_BUSY_MS = Histogram(
    "ventana_event_loop_busy_ms",
    "CPU time of the event-loop thread between two loop-lag probe wake-ups, in ms",
    buckets=(0.5, 1, 2, 3, 5, 10, 25, 50, 100, 250, 1000),
)
UPSTREAM_ERRORS = Counter("ventana_upstream_errors_total", "Upstream failures by type", ["model", "type"])


def render() -> tuple[bytes, str]:
    """Exposition text for /metrics, aggregated across workers in multiprocess mode."""
    if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        registry = CollectorRegistry()
        multiprocess.MultiProcessCollector(registry)
        return generate_latest(registry), CONTENT_TYPE_LATEST
    return generate_latest(), CONTENT_TYPE_LATEST


def observe(record: RequestRecord) -> None:
    """Count one finished request; called once per request, streamed or not."""
    model = record.model
    REQUESTS.labels(model, str(record.status)).inc()
    LATENCY_MS.labels(model).observe(record.total_ms)
    OVERHEAD_MS.labels(model).observe(record.overhead_ms)
    if record.ttfb_ms is not None:
        TTFB_MS.labels(model).observe(record.ttfb_ms)
    PROMPT_TOKENS.labels(model, "original").inc(record.tokens_original)
    PROMPT_TOKENS.labels(model, "assembled").inc(record.tokens_assembled)
    CACHED_TOKENS.labels(model).inc(record.usage.cached_tokens)
