"""Run LiteLLM proxy, the gateway most teams would pick instead, from its own virtual environment.

``pip install 'litellm[proxy]'`` fails here: the extra pins a ``litellm-proxy`` package the
index does not have. So the venv gets litellm plus the proxy's own dependencies by name
(``PROXY_PACKAGES``). The proxy refuses to start without a master key; it is pointed at the
provider simulator as an ``openai/`` model with ``api_base``, with its defaults otherwise
(one worker, no database, no callbacks): the configuration a team would start from.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import yaml

from tests.procs import free_port, stop, wait_http

VENV = Path(__file__).resolve().parent / ".litellm-venv"
MASTER_KEY = "sk-bench"
PROXY_PACKAGES = (
    "litellm",
    "fastapi",
    "uvicorn",
    "uvloop",
    "backoff",
    "orjson",
    "apscheduler",
    "pyyaml",
    "python-multipart",
    "cryptography",
    "email-validator",
    "PyJWT",
    "websockets",
    "rq",
    "gunicorn",
    "semver",
    "hiredis",
    "fastapi-sso",
    "pynacl",
    "mcp",
    "restrictedpython",
    "rich<14",
    "inquirerpy",
    "tomlkit",
    "expression",
    "backports-zstd",
    "litellm-proxy-extras",
    "litellm-enterprise",
    "soundfile",  # imported by the proxy's CLI since litellm 1.110
)


def ensure_venv(venv: Path = VENV) -> Path:
    """Create the proxy's venv on first use; return the ``litellm`` executable."""
    exe = venv / "bin" / "litellm"
    if exe.exists():
        return exe
    print(f"creating {venv} and installing LiteLLM proxy (one-off, a few minutes)", file=sys.stderr)
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    subprocess.run([str(venv / "bin" / "pip"), "install", "-q", *PROXY_PACKAGES], check=True)
    return exe


@contextmanager
def run_litellm(tmp: Path, sim_base_url: str, model: str = "gpt-4o-mini") -> Iterator[tuple[str, float]]:
    """Start the proxy on a free port; yield its base URL and how long it took to answer."""
    exe = ensure_venv()
    port = free_port()
    config = {
        "model_list": [
            {
                "model_name": model,
                "litellm_params": {"model": f"openai/{model}", "api_base": sim_base_url, "api_key": "sk-sim"},
            }
        ],
        "general_settings": {"master_key": MASTER_KEY},
    }
    path = tmp / f"litellm-{port}.yaml"
    path.write_text(yaml.safe_dump(config))
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY") and k != "PYTHONPATH"}
    env["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"
    cmd = [str(exe), "--config", str(path), "--host", "127.0.0.1", "--port", str(port), "--num_workers", "1"]
    started = time.perf_counter()
    with (tmp / f"litellm-{port}.log").open("wb") as log:
        proc = subprocess.Popen(cmd, env=env, stdout=log, stderr=subprocess.STDOUT, cwd=tmp)
        try:
            wait_http(f"http://127.0.0.1:{port}/health/liveliness", timeout=120, proc=proc)
            yield f"http://127.0.0.1:{port}/v1", time.perf_counter() - started
        finally:
            stop(proc)
