"""``PassPolicy``, the base of every pass's settings, in a module of its own.

Each pass's policy model subclasses it beside the pass, and ``policy.Policy`` gathers
them as fields; keeping the base here lets ``policy.py`` import the pass policies
without an import cycle (``policy`` -> pass policy -> ``policy``).
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class PassPolicy(BaseModel):
    """Base for a pass's settings: frozen, strict about unknown keys, on by default."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    enabled: bool = True
