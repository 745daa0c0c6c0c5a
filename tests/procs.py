"""Start real gateway and simulator processes on free loopback ports for end-to-end tests."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import orjson
import yaml


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def stop(proc: subprocess.Popen[bytes], grace_s: float = 15.0) -> None:
    """Ask a server process to exit, then kill it if it has not within ``grace_s``."""
    proc.terminate()
    try:
        proc.wait(grace_s)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(5)


#: How long a server may take to answer after it is spawned. Alone on 2 cores a gateway answers in ~2 s;
#: on a machine running other suites at once start-up (imports) took over 30 s, and a slow start is not
#: what these tests check: a process that dies is still reported at once.
START_TIMEOUT_S = 120.0


def wait_http(url: str, timeout: float = START_TIMEOUT_S, proc: subprocess.Popen[bytes] | None = None) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(f"process exited with {proc.returncode} before {url} answered")
        try:
            if httpx.get(url, timeout=1.0).status_code < 500:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.05)
    raise TimeoutError(f"{url} did not answer within {timeout}s")


REPO_ROOT = Path(__file__).resolve().parent.parent


def _env(extra: dict[str, str] | None = None) -> dict[str, str]:
    """The child's environment: no provider keys, and this checkout's ``gateway`` on the path."""
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO_ROOT), env.get("PYTHONPATH", "")) if p)
    env.update(extra or {})
    return env


@contextmanager
def run_simulator(
    tmp: Path,
    *,
    record: bool = True,
    latency_ms: float = 0.0,
    cache: bool = True,
    cut: bool = False,
    replay: Path | None = None,
) -> Iterator[SimHandle]:
    """Start ``ventana provider-sim``; with ``cut`` also its connection-cutting front (``close`` faults)."""
    port = free_port()
    cut_port = free_port() if cut else None
    record_path = tmp / f"sim-{port}.jsonl"
    cmd = [sys.executable, "-m", "gateway.cli", "provider-sim", "--port", str(port)]
    if record:
        cmd += ["--record", str(record_path)]
    if latency_ms:
        cmd += ["--latency-ms", str(latency_ms)]
    if not cache:
        cmd.append("--no-cache")
    if cut_port:
        cmd += ["--cut-port", str(cut_port)]
    if replay is not None:
        cmd += ["--replay", str(replay)]
    # stderr goes to a file: an unread pipe fills up (each simulated stream drop logs a traceback)
    # and then blocks the simulator mid-test.
    with (tmp / f"sim-{port}.log").open("wb") as sim_log:
        proc = subprocess.Popen(cmd, env=_env(), stdout=subprocess.DEVNULL, stderr=sim_log)
    try:
        wait_http(f"http://127.0.0.1:{port}/v1/models", proc=proc)
        handle = SimHandle(f"http://127.0.0.1:{port}", record_path)
        handle.pid = proc.pid
        handle.warm_up()
        if cut_port:
            handle.cut_base_url = f"http://127.0.0.1:{cut_port}/v1"
        yield handle
    finally:
        proc.terminate()
        proc.wait(10)


class SimHandle:
    def __init__(self, url: str, record_path: Path) -> None:
        self.url = url
        self.base_url = url + "/v1"
        self.record_path = record_path
        self.cut_base_url: str | None = None  # the cutter front, when started with cut=True
        self.pid: int | None = None  # the simulator's process (a benchmark may pin it to a core)

    def warm_up(self) -> None:
        """Answer one request, then forget it: the first answer loads the tokenizer, which can
        take longer than a test's 1 s upstream timeout on a busy machine."""
        body = {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "warm up"}]}
        httpx.post(self.base_url + "/chat/completions", json=body, timeout=60).raise_for_status()
        self.reset()

    def received(self) -> list[dict[str, Any]]:
        if not self.record_path.exists():
            return []
        return [orjson.loads(line) for line in self.record_path.read_bytes().splitlines() if line.strip()]

    def faults(self, *faults: dict[str, Any]) -> None:
        httpx.post(self.url + "/_sim/faults", json={"faults": list(faults)}).raise_for_status()

    def reset(self) -> None:
        httpx.post(self.url + "/_sim/reset").raise_for_status()
        if self.record_path.exists():
            self.record_path.unlink()


def sim_models(base_url: str, **extra: Any) -> list[dict[str, Any]]:
    return [
        {
            "name": "gpt-4o-mini",
            "litellm_model": "openai/gpt-4o-mini",
            "api_base": base_url,
            "context_window": 128000,
            **extra,
        },
        {
            "name": "small-window",
            "litellm_model": "openai/gpt-4o-mini",
            "api_base": base_url,
            "context_window": 8000,
            **extra,
        },
    ]


@contextmanager
def run_gateway(
    tmp: Path, config: dict[str, Any], *, workers: int = 1, env: dict[str, str] | None = None
) -> Iterator[GatewayHandle]:
    port = free_port()
    config_path = tmp / f"ventana-{port}.yaml"
    config_path.write_text(yaml.safe_dump(config))
    log_path = tmp / f"gateway-{port}.log"
    cmd = [
        sys.executable,
        "-m",
        "gateway.cli",
        "serve",
        "--config",
        str(config_path),
        "--port",
        str(port),
        "--workers",
        str(workers),
        "--log-level",
        "warning",
    ]
    with log_path.open("wb") as log:
        proc = subprocess.Popen(cmd, env=_env(env), stdout=log, stderr=subprocess.STDOUT, cwd=tmp)
        try:
            wait_http(f"http://127.0.0.1:{port}/healthz", timeout=120.0, proc=proc)  # --workers N on a busy machine
            yield GatewayHandle(f"http://127.0.0.1:{port}", proc, log_path)
        finally:
            stop(proc)


class GatewayHandle:
    def __init__(self, url: str, proc: subprocess.Popen[bytes], log_path: Path) -> None:
        self.url = url
        self.base_url = url + "/v1"
        self.proc = proc
        self.log_path = log_path

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")
