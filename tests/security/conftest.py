"""An auth-off gateway served in this process (the setting where a browser page is the attacker)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from gateway.api.app import create_app
from gateway.config import parse_settings
from tests.inproc import serve_in_thread
from tests.procs import SimHandle, sim_models


@pytest.fixture(scope="module")
def open_gateway(sim: SimHandle) -> Iterator[str]:
    """Auth off, no admin keys: admin surfaces answer loopback only; the URL has no ``/v1``."""
    with serve_in_thread(create_app(parse_settings({"models": sim_models(sim.base_url)}))) as url:
        yield url
