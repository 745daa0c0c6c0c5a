"""The metrics a request leaves behind, in one process and aggregated across workers."""

from __future__ import annotations

import concurrent.futures
import json
import os
from pathlib import Path

import httpx
import openai
import pytest
from prometheus_client import REGISTRY
from prometheus_client.mmap_dict import MmapedDict
from prometheus_client.parser import text_string_to_metric_families

from gateway import metrics
from gateway.assembly.prefix import COMPONENTS
from gateway.store.record import RequestRecord
from gateway.upstream.model_info import model_info
from gateway.upstream.usage import Usage
from tests.procs import SimHandle, run_gateway, sim_models


def _value(name: str, **labels: str) -> float:
    return REGISTRY.get_sample_value(name, labels) or 0.0


def _record(model: str, **changes: object) -> RequestRecord:
    record = RequestRecord.of(
        request_id="req-1",
        session_id="s",
        created_at=0.0,
        model=model,
        provider="openai",
        caller="anonymous",
        original={},
        assembled={},
        tokens_original=5000,
        tokens_assembled=3000,
        usage=Usage(prompt_tokens=3000, completion_tokens=5, cached_tokens=2048, cache_write_tokens=128),
        total_ms=12.0,
        overhead_ms=0.5,
        ttfb_ms=9.0,
    )
    return record.changed(**changes)


def test_observe_counts_tokens_cache_and_decisions() -> None:
    model = "observe-model"
    decisions = [
        {
            "pass": "prune_tools",
            "action": "pruned",
            "tokens_before": 2500,
            "tokens_after": 500,
            "detail": {"removed": ["a", "b"]},
        },
        {"pass": "render_reminder", "action": "rendered", "tokens_before": 0, "tokens_after": 30, "detail": {}},
        {"pass": "lint_context", "action": "finding", "detail": {"check": "dynamic_tail_last", "severity": "warning"}},
    ]
    record = _record(
        model,
        decisions=decisions,
        predicted_cached_tokens=1920,
        prefix_break="tools",
        component_tokens={"tools": 500, "system": 1200, "history": 1297},
    )
    metrics.observe(record)
    metrics.observe(_record(model, status=502, ttfb_ms=None))
    assert _value("ventana_requests_total", model=model, status="200") == 1
    assert _value("ventana_requests_total", model=model, status="502") == 1
    assert _value("ventana_prompt_tokens_total", model=model, stage="original") == 10_000
    assert _value("ventana_cached_tokens_total", model=model) == 4096
    assert _value("ventana_cache_write_tokens_total", model=model) == 256
    assert _value("ventana_predicted_cached_tokens_total", model=model) == 1920
    assert _value("ventana_prefix_breaks_total", model=model, component="tools") == 1
    assert _value("ventana_prompt_component_tokens_total", model=model, component="system") == 1200
    assert _value("ventana_pass_tokens_saved_total", model=model, **{"pass": "prune_tools"}) == 2000
    assert _value("ventana_pass_tokens_added_total", model=model, **{"pass": "render_reminder"}) == 30
    assert _value("ventana_tools_pruned_total", model=model) == 2
    assert _value("ventana_lint_findings_total", model=model, check="dynamic_tail_last", severity="warning") == 1
    assert _value("ventana_upstream_ttfb_ms_count", model=model) == 1
    assert _value("ventana_request_duration_ms_count", model=model) == 2


def test_events_that_did_not_happen_create_no_series() -> None:
    metrics.observe(_record("quiet-model"))
    assert REGISTRY.get_sample_value("ventana_compactions_total", {"model": "quiet-model"}) is None
    assert REGISTRY.get_sample_value("ventana_tools_pruned_total", {"model": "quiet-model"}) is None


def test_start_series_sets_prices_and_zeroes_only_running_passes() -> None:
    info = model_info("openai/gpt-4o-mini", 128_000)
    metrics.publish_model("priced-model", info)
    metrics.start_series("priced-model", ["prune_tools"])
    assert _value("ventana_model_price", model="priced-model", kind="input") == info.input_cost_per_token > 0
    assert _value("ventana_model_price", model="priced-model", kind="cache_read") == info.cache_read_cost_per_token
    assert _value("ventana_model_context_window_tokens", model="priced-model") == 128_000
    assert REGISTRY.get_sample_value("ventana_tools_pruned_total", {"model": "priced-model"}) == 0
    assert REGISTRY.get_sample_value("ventana_compactions_total", {"model": "priced-model"}) is None
    for component in COMPONENTS:
        labels = {"model": "priced-model", "component": component}
        assert REGISTRY.get_sample_value("ventana_prefix_breaks_total", labels) == 0
        assert REGISTRY.get_sample_value("ventana_prompt_component_tokens_total", labels) == 0
    # the request histograms too: a dashboard's rate() and quantiles have a baseline before the first request
    for histogram in ("ventana_request_duration_ms", "ventana_gateway_overhead_ms", "ventana_upstream_ttfb_ms"):
        assert REGISTRY.get_sample_value(f"{histogram}_count", {"model": "priced-model"}) == 0
        assert REGISTRY.get_sample_value(f"{histogram}_bucket", {"model": "priced-model", "le": "+Inf"}) == 0


def _scrape(url: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    text = httpx.get(url + "/metrics", timeout=10).text
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def _requests_per_worker(multiproc: Path) -> dict[str, float]:
    """Read each worker's own counter file: how many chat requests that process served."""
    served: dict[str, float] = {}
    for path in multiproc.glob("counter_*.db"):
        total = 0.0
        for key, value, _ts, _pos in MmapedDict.read_all_values_from_file(str(path)):
            name = json.loads(key)[1]
            total += value if name == "ventana_requests_total" else 0.0
        served[path.stem.rsplit("_", 1)[-1]] = total
    # The supervising parent process may leave a file of zeros (it imports the metrics, serves nothing).
    return {pid: total for pid, total in served.items() if total}


@pytest.mark.usefixtures("sdk_models")  # answers read 16 threads at a time
def test_two_workers_report_one_aggregate(sim: SimHandle, tmp_path: Path) -> None:
    """With --workers 2 every scrape, whichever worker answers it, shows the sum of both."""
    multiproc = tmp_path / "prom"
    multiproc.mkdir()
    config = {"models": sim_models(sim.base_url)}
    with run_gateway(tmp_path, config, workers=2, env={"PROMETHEUS_MULTIPROC_DIR": str(multiproc)}) as gw:
        # No keep-alive: every request opens a connection, so the kernel spreads them over both workers.
        fresh = httpx.Client(limits=httpx.Limits(max_keepalive_connections=0))
        client = openai.OpenAI(base_url=gw.base_url, api_key="sk-test", max_retries=0, http_client=fresh)

        def ask(i: int) -> int:
            # ~2K new tokens each: a worker busy counting them is not the one waiting in accept(),
            # so the kernel hands the next connection to the other (tiny requests got so cheap
            # that one worker could take 200 of them in a row).
            text = f"question number {i}: " + "some context to read first " * 300
            reply = client.chat.completions.create(model="gpt-4o-mini", messages=[{"role": "user", "content": text}])
            return reply.usage.prompt_tokens

        sent, prompt_tokens = 0, 0
        with concurrent.futures.ThreadPoolExecutor(16) as pool:
            # The kernel picks the worker; send batches until both have served some (nearly always one).
            for _ in range(10):
                prompt_tokens += sum(pool.map(ask, range(sent, sent + 40)))
                sent += 40
                served = _requests_per_worker(multiproc)
                if len(served) == 2:
                    break
        scrapes = [_scrape(gw.url) for _ in range(6)]
    served = _requests_per_worker(multiproc)
    assert len(served) == 2, f"both workers should have served requests: {served}"
    assert sum(served.values()) == sent
    requests = ("ventana_requests_total", (("model", "gpt-4o-mini"), ("status", "200")))
    assembled = ("ventana_prompt_tokens_total", (("model", "gpt-4o-mini"), ("stage", "assembled")))
    price = ("ventana_model_price", (("kind", "input"), ("model", "gpt-4o-mini")))
    for scrape in scrapes:
        assert scrape[requests] == sent
        assert scrape[assembled] == prompt_tokens
        assert scrape[price] == model_info("openai/gpt-4o-mini").input_cost_per_token
        assert ("ventana_store_queue_depth", ()) in scrape
    assert os.environ.get("PROMETHEUS_MULTIPROC_DIR") is None


def test_a_negative_figure_counts_as_zero_instead_of_failing_the_request() -> None:
    record = _record(
        "odd-usage-model", usage=Usage(prompt_tokens=10, cached_tokens=-5), component_tokens={"system": -1}
    )
    metrics.observe(record)
    assert _value("ventana_cached_tokens_total", model="odd-usage-model") == 0
    assert _value("ventana_requests_total", model="odd-usage-model", status="200") == 1
