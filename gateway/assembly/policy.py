"""The ``policy:`` section of the config: one typed block per assembly pass.

Each pass's policy model lives beside the pass; this module only gathers them so the
config has one place to validate them. Every block has ``enabled``; with every block
disabled the gateway forwards requests unchanged.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

from gateway.assembly.compaction_policy import CompactionPolicy
from gateway.assembly.pass_policy import PassPolicy

__all__ = ["PassPolicy", "Policy"]


class Policy(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    compaction: CompactionPolicy = CompactionPolicy()

    def all_disabled(self) -> Policy:
        """A copy with every pass switched off (for byte-for-byte forwarding and baselines)."""
        updates = {
            name: getattr(self, name).model_copy(update={"enabled": False})
            for name in type(self).model_fields
            if isinstance(getattr(self, name), PassPolicy)
        }
        return self.model_copy(update=updates)
