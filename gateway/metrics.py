"""Prometheus metrics (prefix ``ventana_``); labels are bounded: model names from the config only.

With several worker processes, set ``PROMETHEUS_MULTIPROC_DIR`` (``ventana serve
--workers N`` does) and the /metrics route aggregates every worker's numbers.

Every metric is documented in docs/metrics.md. Label values are model names from the
config, pass names, actions, lint checks, error class names and prefix components: never a
session id or anything the client wrote. Pass metrics are derived generically from the
request's decisions (``gateway.decision_tally``), so a new pass is counted without an edit here.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    generate_latest,
    multiprocess,
)

from gateway.assembly.pipeline import PASSES
from gateway.assembly.prefix import COMPONENTS
from gateway.decision_tally import VOCABULARY, tally_decisions
from gateway.store.record import RequestRecord
from gateway.summariser_share import summariser_share
from gateway.upstream.model_info import ModelInfo

if TYPE_CHECKING:
    from gateway.config import ModelConfig, Settings

_MS_BUCKETS = (0.25, 0.5, 1, 2, 5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000, 30000, 60000)

REQUESTS = Counter("ventana_requests_total", "Chat requests by model and HTTP status", ["model", "status"])
REQUEST_ERRORS = Counter(
    "ventana_request_errors_total",
    "Chat requests answered with an error status (>= 400), by model; started at 0 so the first error counts",
    ["model"],
)
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
BILLED_TOKENS = Counter(
    "ventana_billed_tokens_total",
    "Tokens the provider billed (its usage block, summed over every upstream call a request made), by kind",
    ["model", "kind"],
)
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
LOOP_CALLBACK_MS = Histogram(
    "ventana_event_loop_callback_ms",
    "CPU time of each callback the event loop ran (only with diagnostics.time_callbacks set), in ms",
    buckets=(0.5, 1, 2, 3, 5, 10, 25, 50, 100, 250, 1000),
)
UPSTREAM_ERRORS = Counter("ventana_upstream_errors_total", "Upstream failures by type", ["model", "type"])
STORE_QUEUE_DEPTH = Gauge(
    "ventana_store_queue_depth", "Records waiting for the store writer", multiprocess_mode="livesum"
)
STORE_WRITTEN = Counter("ventana_store_written_total", "Records written to the store database")
STORE_SPOOLED = Counter("ventana_store_spooled_total", "Records spooled to the local file while the database was down")
STORE_DROPPED = Counter("ventana_store_dropped_total", "Records lost: the queue was full or the spool failed")
STORE_BACKPRESSURE = Counter(
    "ventana_store_backpressure_total", "Requests that waited for the store writer to catch up before being served"
)
RECORDS_LOST = Counter("ventana_records_lost_total", "Records the recorder raised on instead of accepting")
RESPONSES_NOT_STORED = Counter(
    "ventana_responses_not_stored_total", "Responses API answers delivered but not stored (the store failed)"
)
REJECTED = Counter(
    "ventana_rejected_requests_total", "Requests refused before forwarding (auth, rate limit, bad input)", ["code"]
)

CACHE_WRITE_TOKENS = Counter(
    "ventana_cache_write_tokens_total", "Prompt tokens the provider reported writing to its cache", ["model"]
)
ENGINE_PROMPT_TOKENS = Counter(
    "ventana_engine_prompt_tokens_total",
    "Prompt tokens a local inference engine reported (llama.cpp timings): evaluated (computed) or reused "
    "(taken from its KV cache)",
    ["model", "kind"],
)
PREDICTED_CACHED_TOKENS = Counter(
    "ventana_predicted_cached_tokens_total",
    "Prompt tokens the gateway predicted the provider would read from cache (prefix shared with the session's "
    "previous request, rounded like OpenAI)",
    ["model"],
)
PREFIX_BREAKS = Counter(
    "ventana_prefix_breaks_total",
    "Requests whose prefix differs from the session's previous request, by the component that changed",
    ["model", "component"],
)
COMPONENT_TOKENS = Counter(
    "ventana_prompt_component_tokens_total", "Assembled prompt tokens by component", ["model", "component"]
)
DECISIONS = Counter("ventana_decisions_total", "Assembly decisions by pass and action", ["model", "pass", "action"])
PASS_TOKENS_SAVED = Counter(
    "ventana_pass_tokens_saved_total", "Prompt tokens removed by each assembly pass", ["model", "pass"]
)
PASS_TOKENS_ADDED = Counter(
    "ventana_pass_tokens_added_total", "Prompt tokens added by each pass (reminder, summary)", ["model", "pass"]
)
COMPACTIONS = Counter("ventana_compactions_total", "History compactions (a range replaced by a summary)", ["model"])
REVERTED = Counter(
    "ventana_reverted_total", "Requests whose assembly was undone (the original or a fallback went out)", ["model"]
)
SUMMARIZER_CALLS = Counter(
    "ventana_summarizer_calls_total", "Summariser calls made for compaction, by outcome", ["model", "outcome"]
)
SUMMARY_CLAIMS = Counter(
    "ventana_summary_claims_total",
    "Summariser calls claimed across replicas: called (this process asked the model), reused (another's text), failed",
    ["outcome"],
)
TOOL_SET_CHANGES = Counter(
    "ventana_tool_set_changes_total", "Turns whose pruned tool set differs from the session's previous one", ["model"]
)
TOOLS_PRUNED = Counter("ventana_tools_pruned_total", "Tool definitions removed from requests by pruning", ["model"])
LINT_FINDINGS = Counter(
    "ventana_lint_findings_total", "Validation-gate findings by check and severity", ["model", "check", "severity"]
)
MODEL_PRICE = Gauge(
    "ventana_model_price",
    "Provider price in USD per token, by kind (input, output, cache_read, cache_write), from litellm's price map",
    ["model", "kind"],
    multiprocess_mode="max",
)
MODEL_CONTEXT_WINDOW = Gauge(
    "ventana_model_context_window_tokens", "Context window of each configured model", ["model"], multiprocess_mode="max"
)


#: Error classes ``upstream/`` raises; started at zero so the errors panel shows 0, not "no data".
UPSTREAM_ERROR_TYPES = ("UpstreamRateLimited", "UpstreamTimeout", "UpstreamUnavailable", "UpstreamRejected")
#: Statuses a recorded request most often ends with, started at zero: a series Prometheus first
#: sees at 1 has no earlier sample, so ``increase()`` would miss a (model, status)'s first error.
STARTED_STATUSES = ("200", "400", "429", "499", "500", "502", "503", "504")
#: The codes the gateway's own refusals carry (``gateway.errors``), started at zero for the same reason.
REJECTED_CODES = (
    "invalid_request_error",
    "invalid_api_key",
    "admin_key_required",
    "rate_limit_exceeded",
    "request_too_large",
    "model_not_found",
    "context_length_exceeded",
    "context_lint_failed",
)


def publish_model(name: str, info: ModelInfo) -> None:
    """Expose a configured model's prices and window so PromQL can turn tokens into money."""
    MODEL_PRICE.labels(name, "input").set(info.input_cost_per_token)
    MODEL_PRICE.labels(name, "output").set(info.output_cost_per_token)
    MODEL_PRICE.labels(name, "cache_read").set(info.cache_read_cost_per_token)
    MODEL_PRICE.labels(name, "cache_write").set(info.cache_write_cost_per_token)
    MODEL_CONTEXT_WINDOW.labels(name).set(info.context_window)


def start_series(model: str, passes: Sequence[str]) -> None:
    """Create a model's series at zero, so rate() and the dashboards see 0 before the first event.

    Pass series are started only for ``passes`` (the enabled passes of the pipeline): a pass
    that is not running shows no data rather than a misleading zero.
    """
    for child in (
        *(REQUESTS.labels(model, status) for status in STARTED_STATUSES),
        REQUEST_ERRORS.labels(model),
        REVERTED.labels(model),
        PROMPT_TOKENS.labels(model, "original"),
        PROMPT_TOKENS.labels(model, "assembled"),
        CACHED_TOKENS.labels(model),
        BILLED_TOKENS.labels(model, "prompt"),
        BILLED_TOKENS.labels(model, "completion"),
        CACHE_WRITE_TOKENS.labels(model),
        PREDICTED_CACHED_TOKENS.labels(model),
        *(PREFIX_BREAKS.labels(model, c) for c in COMPONENTS),
        *(COMPONENT_TOKENS.labels(model, c) for c in COMPONENTS),
        *(UPSTREAM_ERRORS.labels(model, t) for t in UPSTREAM_ERROR_TYPES),
    ):
        child.inc(0)
    for histogram in (LATENCY_MS, OVERHEAD_MS, TTFB_MS):  # a histogram's child starts with every bucket at 0
        histogram.labels(model)
    for name in passes:
        for action in VOCABULARY.get(name, ()):
            DECISIONS.labels(model, name, action).inc(0)
        PASS_TOKENS_SAVED.labels(model, name).inc(0)
        PASS_TOKENS_ADDED.labels(model, name).inc(0)
    if "compact_history" in passes:
        COMPACTIONS.labels(model).inc(0)
        SUMMARIZER_CALLS.labels(model, "ok").inc(0)
        SUMMARIZER_CALLS.labels(model, "failed").inc(0)
    if "prune_tools" in passes:
        TOOL_SET_CHANGES.labels(model).inc(0)
        TOOLS_PRUNED.labels(model).inc(0)


def start_gateway(settings: Settings, info: Callable[[ModelConfig], ModelInfo]) -> None:
    """Publish every configured model's prices and start its series; called once per worker."""
    passes = [spec.name for spec in PASSES if getattr(spec.policy(settings.policy), "enabled", True)]
    if passes:
        passes.append("verify_assembly")
    for model in settings.models:
        publish_model(model.name, info(model))
        start_series(model.name, passes)
    for code in REJECTED_CODES:
        REJECTED.labels(code).inc(0)


def stop_worker() -> None:
    """Drop this worker's live gauges (queue depth) from the multiprocess aggregate when it exits."""
    if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        multiprocess.mark_process_dead(os.getpid())  # type: ignore[no-untyped-call]


def render() -> tuple[bytes, str]:
    """Exposition text for /metrics, aggregated across workers in multiprocess mode."""
    if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        registry = CollectorRegistry()
        multiprocess.MultiProcessCollector(registry)  # type: ignore[no-untyped-call]
        return generate_latest(registry), CONTENT_TYPE_LATEST
    return generate_latest(), CONTENT_TYPE_LATEST


# Process-wide: the Prometheus registry is the process's, so are its labelled children.
@functools.lru_cache(maxsize=16_384)
def _child(metric: Any, *labels: str) -> Any:
    """``metric.labels(...)``, memoised: it validates and locks on every call, and one request
    makes about twenty of them. Label values are bounded, so the cache is too."""
    return metric.labels(*labels)


def _add(child: Any, n: int) -> None:
    """Add ``n`` to a counter series already created; nothing at 0 or below (most of a small request's
    figures: cached and cache-write tokens), where ``inc`` would take its lock to add nothing. A negative
    figure (a provider's odd usage block) counts as 0 too: a counter only goes up, and raising inside the
    request being finished would cost it its record."""
    if n > 0:
        child.inc(n)


def observe(record: RequestRecord) -> None:
    """Count one finished request; called once per request, streamed or not."""
    model = record.model
    _child(REQUESTS, model, str(record.status)).inc()
    if record.status >= 400:
        _child(REQUEST_ERRORS, model).inc()
    _child(LATENCY_MS, model).observe(record.total_ms)
    _child(OVERHEAD_MS, model).observe(record.overhead_ms)
    if record.ttfb_ms is not None:
        _child(TTFB_MS, model).observe(record.ttfb_ms)
    _add(_child(PROMPT_TOKENS, model, "original"), record.tokens_original)
    _add(_child(PROMPT_TOKENS, model, "assembled"), record.tokens_assembled)
    # The summariser's calls are billed under the summariser's model, so a dashboard multiplying each
    # model's tokens by its price (ventana_model_price) prices them at the summariser's (summariser_share.py).
    share = summariser_share(record.decisions)
    other = share.model if share.model is not None and share.model != model else None
    moved = (share.cached_tokens, share.prompt_tokens, share.completion_tokens) if other else (0, 0, 0)
    _add(_child(CACHED_TOKENS, model), record.usage.cached_tokens - moved[0])
    _add(_child(BILLED_TOKENS, model, "prompt"), record.usage.prompt_tokens - moved[1])
    _add(_child(BILLED_TOKENS, model, "completion"), record.usage.completion_tokens - moved[2])
    if other is not None:
        _add(_child(CACHED_TOKENS, other), moved[0])
        _add(_child(BILLED_TOKENS, other, "prompt"), moved[1])
        _add(_child(BILLED_TOKENS, other, "completion"), moved[2])
    observe_cache(record)
    observe_decisions(record)


def observe_cache(record: RequestRecord) -> None:
    """The provider's cache figures next to the gateway's prediction, and what broke the prefix."""
    model = record.model
    _add(_child(CACHE_WRITE_TOKENS, model), record.usage.cache_write_tokens)
    if record.usage.evaluated_tokens is not None:
        _add(_child(ENGINE_PROMPT_TOKENS, model, "evaluated"), record.usage.evaluated_tokens)
        _add(_child(ENGINE_PROMPT_TOKENS, model, "reused"), record.usage.reused_tokens or 0)
    _add(_child(PREDICTED_CACHED_TOKENS, model), record.predicted_cached_tokens)
    if record.prefix_break is not None:
        component = record.prefix_break if record.prefix_break in COMPONENTS else "history"
        _child(PREFIX_BREAKS, model, component).inc()
    for component, tokens in record.component_tokens.items():
        if component in COMPONENTS:
            _add(_child(COMPONENT_TOKENS, model, component), tokens)


def observe_decisions(record: RequestRecord) -> None:
    """Derive the pass metrics from the record's decisions, whatever passes produced them."""
    model = record.model
    tally = tally_decisions(record.decisions)
    for (name, action), n in tally.actions.items():
        _child(DECISIONS, model, name, action).inc(n)
    for name, n in tally.tokens_saved.items():
        _child(PASS_TOKENS_SAVED, model, name).inc(n)
    for name, n in tally.tokens_added.items():
        _child(PASS_TOKENS_ADDED, model, name).inc(n)
    for (check, severity), n in tally.lint_findings.items():
        _child(LINT_FINDINGS, model, check, severity).inc(n)
    # Only events that happened: a pass that is not running keeps "no data" (see start_series).
    # (.labels() creates the series, so it is called only when there is something to count.)
    for counter, labels, n in (
        (COMPACTIONS, (model,), tally.compactions),
        (REVERTED, (model,), tally.reverted),
        (SUMMARIZER_CALLS, (model, "ok"), tally.summarizer_calls),
        (SUMMARIZER_CALLS, (model, "failed"), tally.summarizer_failures),
        (TOOL_SET_CHANGES, (model,), tally.tool_set_changes),
        (TOOLS_PRUNED, (model,), tally.tools_pruned),
    ):
        if n:
            _child(counter, *labels).inc(n)
