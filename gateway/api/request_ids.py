"""The id every answer carries (``x-ventana-request-id``), named once for every door and the error handlers.

A client holding it finds the request in ``ventana logs`` and ``/ui``: the record, a refusal and a compaction the
gateway answered itself are all stored under it.
"""

from __future__ import annotations

import os

REQUEST_ID_HEADER = "x-ventana-request-id"


def new_request_id() -> str:
    """A fresh id (``uuid4`` is the same randomness, slower)."""
    return "req-" + os.urandom(10).hex()
