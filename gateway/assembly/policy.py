"""The ``policy:`` section of the config: one typed block per assembly pass.

Each pass's policy model lives beside the pass; this module only gathers them so the
config has one place to validate them. Every block has ``enabled``; with every block
disabled the gateway forwards requests unchanged.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class PassPolicy(BaseModel):
    """Base for a pass's settings: frozen, strict about unknown keys, on by default."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    enabled: bool = True


# Each pass's policy sits beside the pass; imported here, after PassPolicy, which they subclass.
from gateway.assembly.prune_tools import ToolPolicy  # noqa: E402


class Policy(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    tools: ToolPolicy = ToolPolicy()

    def all_disabled(self) -> Policy:
        """A copy with every pass switched off (for byte-for-byte forwarding and baselines)."""
        updates = {
            name: getattr(self, name).model_copy(update={"enabled": False})
            for name in type(self).model_fields
            if isinstance(getattr(self, name), PassPolicy)
        }
        return self.model_copy(update=updates)
