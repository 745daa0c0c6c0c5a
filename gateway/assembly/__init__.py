"""The context-assembly pipeline: pure passes over a chat request (see ``pipeline.PASSES``).

``policy`` is imported first so that importing any pass module on its own resolves the
pass policies in one order: ``policy`` defines ``PassPolicy``, then imports each pass's
policy model, which subclasses it.
"""

from __future__ import annotations

from gateway.assembly import policy as _policy  # noqa: F401
