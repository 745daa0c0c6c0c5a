from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

import gateway  # noqa: F401  (offline tiktoken and litellm settings)
from tests.procs import GatewayHandle, SimHandle, run_gateway, run_simulator, sim_models
from tests.shared_data import shared_dir

SHARED = shared_dir()


@pytest.fixture(scope="session")
def shared_dir() -> Path:
    if not SHARED.is_dir():
        pytest.skip(f"shared data not found at {SHARED}")
    return SHARED


@pytest.fixture(scope="session")
def sim(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SimHandle]:
    with run_simulator(tmp_path_factory.mktemp("sim")) as handle:
        yield handle


@pytest.fixture(scope="session")
def passthrough_gateway(sim: SimHandle, tmp_path_factory: pytest.TempPathFactory) -> Iterator[GatewayHandle]:
    """A gateway with every assembly pass off: it must forward requests unchanged."""
    config = {"models": sim_models(sim.base_url), "policy": _all_passes_off()}
    with run_gateway(tmp_path_factory.mktemp("gw-pass"), config) as handle:
        yield handle


@pytest.fixture(scope="session")
def default_gateway(sim: SimHandle, tmp_path_factory: pytest.TempPathFactory) -> Iterator[GatewayHandle]:
    """A gateway with the bundled policy (every pass on, defaults)."""
    config = {"models": sim_models(sim.base_url)}
    with run_gateway(tmp_path_factory.mktemp("gw-default"), config) as handle:
        yield handle


def _all_passes_off() -> dict[str, dict[str, bool]]:
    from gateway.assembly.policy import Policy

    return {name: {"enabled": False} for name in Policy.model_fields}
