"""The assembly pipeline: the ordered list of passes every chat request goes through.

Every behaviour of the gateway's context engineering is one hop from ``PASSES``.
``assemble`` runs the enabled passes in order, then the final safety check: if the
assembled request is not a faithful rewrite of the original (a tool call split from
its result, the last user turn altered, ...), the original goes out unchanged and the
failure is recorded. The gateway never makes a request worse than the client sent it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from gateway.assembly.context import Context, Decision, Pass
from gateway.assembly.policy import Policy
from gateway.assembly.prune_tools import prune_tools
from gateway.assembly.verify_assembly import verify_assembly


@dataclass(frozen=True, slots=True)
class PassSpec:
    name: str
    run: Pass
    policy: Callable[[Policy], Any]


# Order matters (each pass slots in at its line as it lands):
# 1. move_volatile           strips per-turn values from the prefix first, so nothing after sees them as stable
# 2. attach_documents        documents are placed before the question; later passes count them
# 3. prune_tools             tool set is fixed before compaction counts the prompt
# 4. clear_tool_results      cheap clearing before any summarising
# 5. compact_history         needs the final tools and documents to know the prompt size
# 6. recall_memory           recalled passages go in the dynamic tail, after compaction decided what aged out
# 7. restate_rules           adds critical rules to the reminder lines
# 8. render_reminder         renders every reminder line as the last message; nothing may append after it
# 9. place_cache_breakpoints marks the stable prefix once the layout is final
# 10. lint_context           checks the final layout against the validation gate
PASSES: tuple[PassSpec, ...] = (PassSpec("prune_tools", prune_tools, lambda p: p.tools),)


@dataclass(frozen=True, slots=True)
class Assembly:
    original: Context
    assembled: Context
    decisions: tuple[Decision, ...]
    reverted: bool = False


def assemble(ctx: Context, policy: Policy, passes: tuple[PassSpec, ...] = PASSES) -> Assembly:
    """Run every enabled pass over ``ctx``, then the final safety check."""
    current = ctx
    decisions: list[Decision] = []
    for spec in passes:
        pass_policy = spec.policy(policy)
        if not getattr(pass_policy, "enabled", True):
            continue
        current, made = spec.run(current, current.session, pass_policy)
        decisions.extend(made)
    if current is ctx:
        return Assembly(ctx, ctx, tuple(decisions))
    problems = verify_assembly(ctx, current, decisions)
    if problems:
        failure = Decision(
            "verify_assembly",
            "reverted",
            reason="assembled request failed the safety check; forwarding the original: " + "; ".join(problems),
            detail={"problems": problems},
        )
        return Assembly(ctx, ctx, (*decisions, failure), reverted=True)
    return Assembly(ctx, current, tuple(decisions))
