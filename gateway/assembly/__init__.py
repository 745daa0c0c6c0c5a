"""The pure assembly pipeline (see ``pipeline.PASSES``).

``policy`` is imported first: pass modules import ``PassPolicy`` from it while it imports
their policy models, so starting from ``policy`` keeps that cycle well-founded whichever
pass module a caller imports first.
"""

from __future__ import annotations

from gateway.assembly import policy as _policy  # noqa: F401
