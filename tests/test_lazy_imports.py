"""Serving never imports litellm (seconds of start-up): it is imported on first use by a non-OpenAI model."""

from __future__ import annotations

import subprocess
import sys

from tests.procs import REPO_ROOT, _env

_PROBE = (
    "import sys, gateway.cli, gateway.serve, gateway.api.app; "
    "from gateway.config import load_settings; "
    "gateway.api.app.create_app(load_settings()); "
    "print(sorted(m for m in sys.modules if m == 'litellm' or m.startswith('litellm.')))"
)


def test_building_the_served_app_does_not_import_litellm() -> None:
    out = subprocess.run(
        [sys.executable, "-c", _PROBE], env=_env(), capture_output=True, text=True, cwd=REPO_ROOT, check=True
    )
    assert out.stdout.strip() == "[]"
