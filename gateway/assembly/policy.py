"""The ``policy:`` section of the config: one typed block per assembly pass.

Each pass's policy model lives beside the pass; this module only gathers them so the
config has one place to validate them. Every block has ``enabled``; with every block
disabled the gateway forwards requests unchanged.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

from gateway.assembly.pass_policy import PassPolicy

__all__ = ["PassPolicy", "Policy"]


# Each pass's policy model sits beside its pass (they subclass PassPolicy); imported after it.
from gateway.assembly.attach_documents import DocumentPolicy
from gateway.assembly.compaction_policy import CompactionPolicy
from gateway.assembly.lint_context import LintPolicy
from gateway.assembly.move_volatile import VolatilePolicy
from gateway.assembly.place_cache_breakpoints import CachePolicy
from gateway.assembly.prune_tools import ToolPolicy
from gateway.assembly.recall_memory import MemoryPolicy
from gateway.assembly.render_reminder import ReminderPolicy
from gateway.assembly.restate_rules import RulesPolicy
from gateway.assembly.shrink_oversize import OversizePolicy


class Policy(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    volatile: VolatilePolicy = VolatilePolicy()
    rules: RulesPolicy = RulesPolicy()
    reminder: ReminderPolicy = ReminderPolicy()
    cache_breakpoints: CachePolicy = CachePolicy()
    lint: LintPolicy = LintPolicy()
    compaction: CompactionPolicy = CompactionPolicy()
    attach_documents: DocumentPolicy = DocumentPolicy()
    shrink_oversize: OversizePolicy = OversizePolicy()
    tools: ToolPolicy = ToolPolicy()
    memory: MemoryPolicy = MemoryPolicy()

    def all_disabled(self) -> Policy:
        """A copy with every pass switched off (for byte-for-byte forwarding and baselines)."""
        updates = {
            name: getattr(self, name).model_copy(update={"enabled": False})
            for name in type(self).model_fields
            if isinstance(getattr(self, name), PassPolicy)
        }
        return self.model_copy(update=updates)
