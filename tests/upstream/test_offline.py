"""litellm never reaches the network on its own: only the upstreams the config names are called.

The gateway runs with a ``sitecustomize`` that records (and refuses) every name lookup that
is not loopback. Before the gateway pinned litellm's offline switches, the first Messages
request carrying ``anthropic-beta`` (Claude Code sends one on every request) made litellm
fetch its beta-header map from raw.githubusercontent.com while serving.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import anthropic
import openai
import pytest

from gateway import LITELLM_OFFLINE
from tests.procs import REPO_ROOT, GatewayHandle, SimHandle, run_gateway, run_simulator, sim_models

CLAUDE = "claude-sonnet-4-5"
SPY = """
import os, socket

_lookup = socket.getaddrinfo
_LOOPBACK = {"127.0.0.1", "localhost", "::1", "0.0.0.0"}


def _recorded(host, *args, **kwargs):
    name = host.decode() if isinstance(host, bytes) else str(host)
    if host is not None and name not in _LOOPBACK:
        with open(os.environ["VENTANA_TEST_LOOKUPS"], "a") as out:
            out.write(name + "\\n")
        raise socket.gaierror(socket.EAI_NONAME, "no network in this test")
    return _lookup(host, *args, **kwargs)


socket.getaddrinfo = _recorded
"""


@pytest.fixture(scope="module")
def sim(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SimHandle]:
    with run_simulator(tmp_path_factory.mktemp("sim-offline")) as handle:
        yield handle


@pytest.fixture(scope="module")
def lookups(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("lookups") / "hosts.txt"


@pytest.fixture(scope="module")
def gw(sim: SimHandle, lookups: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[GatewayHandle]:
    tmp = tmp_path_factory.mktemp("gw-offline")
    spy = tmp / "spy"
    spy.mkdir()
    (spy / "sitecustomize.py").write_text(SPY)
    claude = {"name": CLAUDE, "litellm_model": f"anthropic/{CLAUDE}", "api_base": sim.url, "api_key_env": "SIM_KEY"}
    env = {
        "PYTHONPATH": os.pathsep.join((str(spy), str(REPO_ROOT))),
        "VENTANA_TEST_LOOKUPS": str(lookups),
        "SIM_KEY": "sk-sim-anthropic",
        # as in a shell that never heard of them (this process imported gateway, which set them)
        **{name: "" for name in LITELLM_OFFLINE},
    }
    with run_gateway(tmp, {"models": [*sim_models(sim.base_url), {**claude, "context_window": 200_000}]}, env=env) as h:
        yield h


def test_serving_both_kinds_of_upstream_looks_up_no_other_host(gw: GatewayHandle, lookups: Path) -> None:
    claude = anthropic.Anthropic(base_url=gw.url, api_key="sk-client", max_retries=0)
    beta = {"anthropic-beta": "prompt-caching-2024-07-31,context-management-2025-06-27"}
    tool = {"name": "lookup", "description": "Look a word up", "input_schema": {"type": "object", "properties": {}}}
    hello = [{"role": "user", "content": "hello"}]
    assert claude.messages.create(model=CLAUDE, max_tokens=32, messages=hello, extra_headers=beta, tools=[tool]).content  # type: ignore[arg-type]
    with claude.messages.stream(model=CLAUDE, max_tokens=32, messages=hello, extra_headers=beta) as stream:  # type: ignore[arg-type]
        assert stream.get_final_text()
    chat = openai.OpenAI(base_url=gw.base_url, api_key="sk-client", max_retries=0)
    for model in (CLAUDE, "gpt-4o-mini"):
        assert chat.chat.completions.create(model=model, messages=hello).choices[0].message.content  # type: ignore[arg-type]
    assert not lookups.exists(), f"litellm looked up {sorted(set(lookups.read_text().split()))}"
    assert "Failed to fetch" not in gw.log()
