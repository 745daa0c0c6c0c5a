"""The store side of the load test: a real SQL store, an optional outage drill, and the count.

``load_faults`` sends the traffic; this module gives it a database to record into (a
fresh SQLite file, or a PostgreSQL database created for the run and dropped afterwards),
starts ``ventana serve`` on it (the production ``SqlRecorder``: queue, batched writer,
spool), cuts the database part way through when asked (a TCP proxy between the gateway
and PostgreSQL, ``tests/store/outage.py``), and counts afterwards what reached the
store, by request id, reading the database directly rather than asking the gateway.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import httpx
import yaml
from sqlalchemy import select

from gateway.store.engine import make_engine
from gateway.store.migrate import upgrade
from gateway.store.models import Request
from tests.procs import _env, free_port, sim_models, wait_http
from tests.store.databases import postgres_available, postgres_database
from tests.store.outage import DatabaseOutage, database_outage

StoreKind = Literal["sqlite", "postgres"]
GATEWAY_UPSTREAM = {"timeout_s": 1.0, "max_retries": 2, "retry_backoff_s": 0.05}


@dataclass(frozen=True, slots=True)
class StoreUnderTest:
    kind: StoreKind
    real_url: str  # what the counting reads
    gateway_url: str  # what the gateway writes to (through the proxy during a drill)
    outage: DatabaseOutage | None


@dataclass(slots=True)
class Outage:
    """Cut the database ``at_s`` seconds into the run, for ``for_s`` seconds."""

    proxy: DatabaseOutage
    at_s: float
    for_s: float
    cut_at: float | None = None
    restored_at: float | None = None

    async def run(self, start: float) -> None:
        await asyncio.sleep(max(0.0, start + self.at_s - time.perf_counter()))
        await asyncio.to_thread(self.proxy.cut)
        self.cut_at = time.perf_counter() - start
        await asyncio.sleep(self.for_s)
        await asyncio.to_thread(self.proxy.restore)
        self.restored_at = time.perf_counter() - start


@contextmanager
def store_under_test(kind: StoreKind, tmp: Path, *, outage: bool) -> Iterator[StoreUnderTest]:
    """A migrated, empty store of ``kind``; PostgreSQL ones are dropped on exit."""
    if kind == "sqlite":
        if outage:
            raise ValueError("the database outage drill needs --store postgres (SQLite is a local file)")
        url = f"sqlite:///{tmp / 'store.db'}"
        upgrade(url)
        yield StoreUnderTest(kind, url, url, None)
        return
    if not postgres_available():
        raise RuntimeError("PostgreSQL is not reachable at 127.0.0.1:5432")
    with ExitStack() as stack:
        real_url = stack.enter_context(postgres_database())
        upgrade(real_url)
        if not outage:
            yield StoreUnderTest(kind, real_url, real_url, None)
            return
        proxy = stack.enter_context(database_outage())
        yield StoreUnderTest(kind, real_url, proxy.url_through(real_url), proxy)


def start_gateway(tmp: Path, sim_cut_url: str, store: StoreUnderTest) -> tuple[subprocess.Popen[bytes], str]:
    """``ventana serve`` on a free port, recording into ``store``; returns the process and its /v1 URL."""
    port = free_port()
    config: dict[str, Any] = {
        "models": sim_models(sim_cut_url),
        "upstream": GATEWAY_UPSTREAM,
        "database_url": store.gateway_url,
        "store": {"spool_path": str(tmp / "spool.jsonl")},
    }
    path = tmp / "gateway.yaml"
    path.write_text(yaml.safe_dump(config))
    cmd = [sys.executable, "-m", "gateway.cli", "serve", "--config", str(path), "--port", str(port)]
    with (tmp / "gateway.log").open("wb") as log:
        proc = subprocess.Popen([*cmd, "--log-level", "warning"], env=_env(), stdout=log, stderr=log, cwd=tmp)
    wait_http(f"http://127.0.0.1:{port}/healthz", proc=proc)
    return proc, f"http://127.0.0.1:{port}/v1"


def store_status(gateway_url: str) -> dict[str, Any]:
    """The recorder's own account (written, spooled, dropped, spool pending) from ``/readyz``."""
    return dict(httpx.get(gateway_url.removesuffix("/v1") + "/readyz", timeout=5).json()["store_status"])


def _stored(real_url: str) -> dict[str, int]:
    engine = make_engine(real_url)
    try:
        with engine.connect() as conn:
            return {rid: status for rid, status in conn.execute(select(Request.request_id, Request.status))}
    finally:
        engine.dispose()


def count_recorded(real_url: str, failed: dict[str, bool], wait_s: float = 20.0) -> tuple[int, int, int]:
    """Rows for the sent requests, how many disagree with the client, and rows nobody sent.

    ``failed`` maps each request id to whether its client saw an error. Waits up to
    ``wait_s`` for the writer to catch up (and to replay its spool after an outage).
    """
    deadline = time.monotonic() + wait_s
    while True:
        stored = _stored(real_url)
        if set(failed) <= set(stored) or time.monotonic() > deadline:
            break
        time.sleep(0.25)
    recorded = sum(1 for rid in failed if rid in stored)
    mismatched = sum(1 for rid, err in failed.items() if rid in stored and (stored[rid] >= 400) != err)
    return recorded, mismatched, len(set(stored) - set(failed))
