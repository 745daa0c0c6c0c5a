"""Where tests and benchmarks find the public data.

Tests read ``tests/data/``: small subsets of the public files, with their licences, kept in
the repository (cut by ``tests/data/make_subsets.py``, origins in ``tests/data/README.md``),
so a clone's suite needs nothing beside it. ``tests/conftest.py`` points ``$VENTANA_DATA``
there before anything is imported, so benchmark helpers a test calls read the subset too.

Benchmarks run on their own read the full files: ``$VENTANA_DATA``, else ``data/`` of the
nearest ``shared/`` folder above this checkout (``$VENTANA_SHARED`` overrides). A missing
file raises :class:`MissingData`, which ``benchmarks/__init__.py`` reports in one line
(which file, where to put it) instead of a traceback.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import orjson

_HERE = Path(__file__).resolve()
#: The in-repository subsets the tests read.
TEST_DATA = _HERE.parent / "data"
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


class MissingData(FileNotFoundError):
    """A benchmark's data file is absent: a message to print, not a crash to debug."""


def shared_dir() -> Path:
    """The nearest ``shared/`` holding ``data/`` above this checkout (may not exist)."""
    if os.environ.get("VENTANA_SHARED"):
        return Path(os.environ["VENTANA_SHARED"])
    return next(
        (p / "shared" for p in _HERE.parents if (p / "shared" / "data").is_dir()),
        _HERE.parent.parent.parent / "shared",
    )


def shared_path(*parts: str) -> Path:
    """A path under ``shared/`` (seeds, specs): for benchmarks only, tests must not need it."""
    return shared_dir().joinpath(*parts)


def data_dir() -> Path:
    """``$VENTANA_DATA`` (``tests/data`` under pytest), else ``shared/data``."""
    return Path(os.environ.get("VENTANA_DATA") or shared_path("data"))


def data_path(*parts: str) -> Path:
    """A data file under :func:`data_dir` (existing or not)."""
    return data_dir().joinpath(*parts)


def need(path: Path) -> Path:
    """``path`` if it exists; else :class:`MissingData` naming it and how to provide it."""
    if not path.exists():
        raise MissingData(
            f"{path} not found: this benchmark reads the full public data "
            "(put the shared/ folder above the checkout, or set VENTANA_SHARED or VENTANA_DATA)"
        )
    return path


def data_rows(name: str) -> list[dict[str, Any]]:
    """Every JSON line of the data file ``name`` (``toolbench.jsonl``, ``agent_loops/...``)."""
    path = need(data_path(name))
    return [orjson.loads(line) for line in path.read_bytes().splitlines() if line.strip()]
