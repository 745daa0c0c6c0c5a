"""Run Debian's ``prometheus`` binary against a gateway for dashboard tests and previews.

Each run gets its own config, storage directory and free port, so it never meets another
engineer's Prometheus on the same machine. The scrape interval is short (1 s by default)
so a test sees its traffic within seconds.
"""

from __future__ import annotations

import shutil
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import yaml

from tests.procs import free_port, stop, wait_http


class PrometheusError(RuntimeError):
    pass


class PromHandle:
    def __init__(self, url: str, log_path: Path) -> None:
        self.url = url
        self.log_path = log_path

    def query(self, promql: str, at: float | None = None) -> list[dict[str, Any]]:
        """Instant query; raises with Prometheus' own message when the PromQL is invalid."""
        params: dict[str, Any] = {"query": promql}
        if at is not None:
            params["time"] = at
        body = httpx.get(self.url + "/api/v1/query", params=params, timeout=10).json()
        if body.get("status") != "success":
            raise PrometheusError(f"{promql}: {body.get('errorType')}: {body.get('error')}")
        return list(body["data"]["result"])

    def query_range(self, promql: str, start: float, end: float, step: float) -> list[dict[str, Any]]:
        params = {"query": promql, "start": start, "end": end, "step": step}
        body = httpx.get(self.url + "/api/v1/query_range", params=params, timeout=20).json()
        if body.get("status") != "success":
            raise PrometheusError(f"{promql}: {body.get('errorType')}: {body.get('error')}")
        return list(body["data"]["result"])

    def scalar(self, promql: str) -> float:
        """The single value of a query that aggregates to one series (0 when it has none)."""
        result = self.query(promql)
        return float(result[0]["value"][1]) if result else 0.0

    def wait_for(self, promql: str, expected: float, timeout: float = 20.0) -> float:
        """Poll until the query's value equals ``expected`` (a scrape after the traffic)."""
        deadline = time.monotonic() + timeout
        value = self.scalar(promql)
        while value != expected and time.monotonic() < deadline:
            time.sleep(0.25)
            value = self.scalar(promql)
        return value

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")


def prometheus_binary() -> str | None:
    return shutil.which("prometheus")


@contextmanager
def run_prometheus(tmp: Path, target: str | list[str], *, scrape_interval: str = "1s") -> Iterator[PromHandle]:
    """Start Prometheus scraping ``target`` (host:port, path /metrics; a list: one target per replica)."""
    targets = [target] if isinstance(target, str) else list(target)
    binary = prometheus_binary()
    if binary is None:
        raise PrometheusError("the prometheus binary is not installed (tests/run.sh installs Debian's package)")
    port = free_port()
    config = {
        "global": {"scrape_interval": scrape_interval, "evaluation_interval": scrape_interval},
        "scrape_configs": [{"job_name": "ventana", "static_configs": [{"targets": targets}]}],
    }
    config_path = tmp / "prometheus.yml"
    config_path.write_text(yaml.safe_dump(config))
    log_path = tmp / "prometheus.log"
    cmd = [
        binary,
        f"--config.file={config_path}",
        f"--storage.tsdb.path={tmp / 'data'}",
        f"--web.listen-address=127.0.0.1:{port}",
        "--log.level=warn",
    ]
    with log_path.open("wb") as log:
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, cwd=tmp)
        try:
            wait_http(f"http://127.0.0.1:{port}/-/ready", timeout=30, proc=proc)
            yield PromHandle(f"http://127.0.0.1:{port}", log_path)
        finally:
            stop(proc, grace_s=10)
