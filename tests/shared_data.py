"""Find the team's ``shared/`` folder (public data, seeds, specs) from any checkout.

It sits beside the checkout in CI (``../shared``) and beside an ancestor of a git
worktree; ``$VENTANA_SHARED`` overrides both. Tests and benchmarks both read through here.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import orjson

_HERE = Path(__file__).resolve()
#: Every data file of ``shared/data/``, for benchmarks that report one row per file.
DATA_FILES = (
    "agent_loops/mini_swe_agent_deepseek.jsonl",
    "agent_loops/tau2_telecom_default.jsonl",
    "agent_loops/tau2_telecom_solo.jsonl",
    "long_conversations/rhelm.jsonl",
    "bfcl.jsonl",
    "bfcl_memory.jsonl",
    "metatool.jsonl",
    "toolbench.jsonl",
)


def shared_dir() -> Path:
    """The nearest ``shared/`` holding ``data/`` above this checkout (may not exist)."""
    if os.environ.get("VENTANA_SHARED"):
        return Path(os.environ["VENTANA_SHARED"])
    return next(
        (p / "shared" for p in _HERE.parents if (p / "shared" / "data").is_dir()),
        _HERE.parent.parent.parent / "shared",
    )


def shared_path(*parts: str) -> Path:
    return shared_dir().joinpath(*parts)


def data_rows(name: str) -> list[dict[str, Any]]:
    """Every JSON line of ``shared/data/<name>``."""
    path = shared_path("data", name)
    if not path.is_file():
        raise FileNotFoundError(f"{path} not found (set VENTANA_SHARED to the shared folder)")
    return [orjson.loads(line) for line in path.read_bytes().splitlines() if line.strip()]
