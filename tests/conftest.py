from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import settings

import gateway  # noqa: F401  (offline tiktoken and litellm settings)
from tests.procs import GatewayHandle, SimHandle, run_gateway, run_simulator, sim_models
from tests.sdk_models import build_all
from tests.shared_data import TEST_DATA

# Tests read the subsets kept in tests/data, never a ../shared a clone does not have; set before
# any test module (or benchmark helper it imports) resolves a data path.
os.environ["VENTANA_DATA"] = str(TEST_DATA)

# Property tests draw the same examples on every run: a suite green once is green again, and a slow
# example (the loop properties take 5-10 s each) does not come and go with the seed. Hunting for new
# failures is a separate run: VENTANA_HYPOTHESIS=explore draws fresh examples and keeps failing ones.
settings.register_profile("ci", derandomize=True, database=None, print_blob=True)
settings.register_profile("explore", derandomize=False, print_blob=True)
settings.load_profile(os.environ.get("VENTANA_HYPOTHESIS", "ci"))

# The clients tests/run.sh installs at their pinned versions (tests/clients.txt) come first on PATH,
# for the tests that look a CLI up and for the shell blocks of the docs they run: a claude or codex
# installed elsewhere is used only when this checkout has none.
_PINNED_BIN = Path(__file__).resolve().parent.parent / ".clients" / "node_modules" / ".bin"
if _PINNED_BIN.is_dir():
    os.environ["PATH"] = os.pathsep.join([str(_PINNED_BIN), os.environ.get("PATH", "")])


@pytest.fixture(scope="session")
def sdk_models() -> None:
    """The openai SDK's answer models built in this thread, for a test whose clients read answers from a pool
    of threads (pydantic builds a deferred model unsafely across threads: tests/sdk_models.py)."""
    build_all()


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
