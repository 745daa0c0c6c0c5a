"""Benchmarks, run one by one as ``python -m benchmarks.<name>``; measured figures go to RESULTS.md.

Most read the full public data (``tests/shared_data.py`` says where). When a file is absent
the run stops with one line naming it and how to provide it, not a traceback.
"""

from __future__ import annotations

import sys
from types import TracebackType

from tests.shared_data import MissingData

_previous_hook = sys.excepthook


def _report_missing_data(kind: type[BaseException], value: BaseException, trace: TracebackType | None) -> None:
    if issubclass(kind, MissingData):
        print(f"benchmark not run: {value}", file=sys.stderr)
        return
    _previous_hook(kind, value, trace)


sys.excepthook = _report_missing_data
