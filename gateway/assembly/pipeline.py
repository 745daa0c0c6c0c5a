"""The assembly pipeline: the ordered list of passes every chat request goes through.

Every behaviour of the gateway's context engineering is one hop from ``PASSES``.
``assemble`` runs the enabled passes in order, then the final safety check: if the
assembled request is not a faithful rewrite of the original (a tool call split from
its result, the last user turn altered, ...), the original goes out unchanged and the
failure is recorded. The gateway never makes a request worse than the client sent it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass

from gateway.assembly.attach_documents import attach_documents
from gateway.assembly.clear_tool_results import clear_tool_results, condense_tail
from gateway.assembly.compact_history import compact_history
from gateway.assembly.context import Context, Decision, Pass
from gateway.assembly.hint_cache import hint_cache
from gateway.assembly.lint_context import LintPolicy, lint_context
from gateway.assembly.move_volatile import move_volatile
from gateway.assembly.pass_policy import PassPolicy
from gateway.assembly.place_cache_breakpoints import place_cache_breakpoints
from gateway.assembly.policy import Policy
from gateway.assembly.prune_tools import prune_tools
from gateway.assembly.recall_memory import recall_memory
from gateway.assembly.render_reminder import render_reminder
from gateway.assembly.restate_rules import restate_rules
from gateway.assembly.shrink_oversize import shrink_oversize
from gateway.assembly.verify_assembly import verify_assembly
from gateway.errors import VentanaError
from gateway.object_memo import ObjectMemo

log = logging.getLogger("ventana")


@dataclass(frozen=True, slots=True)
class PassSpec:
    name: str
    run: Pass
    policy: Callable[[Policy], PassPolicy]


def _compaction_threshold(policy: Policy) -> float | None:
    """The configured compaction threshold (None when compaction is off)."""
    return policy.compaction.threshold if policy.compaction.enabled else None


#: policy -> its lint policy: a pydantic copy costs ~30 us, and the policy is the gateway's
#: settings, the same (frozen) object on every request. Process-wide on purpose: keyed by the
#: policy object (a gateway's own), reached by ``PassSpec.policy(policy)``, which has no Env.
_LINT_POLICIES: ObjectMemo[LintPolicy] = ObjectMemo(limit=64)


def _lint_policy(policy: Policy) -> LintPolicy:
    """The lint policy with what the other passes declare, so the gate checks the real config."""
    return _LINT_POLICIES.get_or(policy, _merged_lint_policy)


def _merged_lint_policy(policy: Policy) -> LintPolicy:
    return policy.lint.model_copy(
        update={
            "volatile_patterns": {**policy.volatile.patterns, **policy.lint.volatile_patterns},
            "rules": (*policy.rules.rules, *policy.lint.rules),
            "compaction_threshold": policy.lint.compaction_threshold or _compaction_threshold(policy),
        }
    )


# Order matters (each pass slots in at its line as it lands):
# 1. move_volatile           strips per-turn values from the prefix first, so nothing after sees them as stable
# 2. attach_documents        documents are placed before the question; later passes count them
# 3. prune_tools             tool set is fixed before compaction counts the prompt
# 4. clear_tool_results      cheap clearing before any summarising
# 5. compact_history         needs the final tools and documents to know the prompt size
# 5a. condense_tail          a summary that left the request over its target: the tail's older rounds' results cleared
# 5b. shrink_oversize        only a single huge message can still overflow once history is compacted; it runs
#                            before the small dynamic-tail passes so its 80 % line leaves them (and the reply) room
# 6. recall_memory           recalled passages go in the dynamic tail, after compaction decided what aged out
# 7. restate_rules           adds critical rules to the reminder lines
# 8. render_reminder         renders every reminder line as the last message; nothing may append after it
# 9. place_cache_breakpoints marks the stable prefix once the layout is final
# 10. hint_cache             names the session's provider cache (prompt_cache_key); body params only
# 11. lint_context           checks the final layout against the validation gate
PASSES: tuple[PassSpec, ...] = (
    PassSpec("move_volatile", move_volatile, lambda p: p.volatile),
    PassSpec("attach_documents", attach_documents, lambda p: p.attach_documents),
    PassSpec("prune_tools", prune_tools, lambda p: p.tools),
    PassSpec("clear_tool_results", clear_tool_results, lambda p: p.compaction),
    PassSpec("compact_history", compact_history, lambda p: p.compaction),
    PassSpec("condense_tail", condense_tail, lambda p: p.compaction),
    PassSpec("shrink_oversize", shrink_oversize, lambda p: p.shrink_oversize),
    PassSpec("recall_memory", recall_memory, lambda p: p.memory),
    PassSpec("restate_rules", restate_rules, lambda p: p.rules),
    PassSpec("render_reminder", render_reminder, lambda p: p.reminder),
    PassSpec("place_cache_breakpoints", place_cache_breakpoints, lambda p: p.cache_breakpoints),
    PassSpec("hint_cache", hint_cache, lambda p: p.compaction),
    PassSpec("lint_context", lint_context, _lint_policy),
)
#: The passes that shape what is forwarded. ``lint_context`` only reports, so unless lint is
#: strict (a finding refuses the request) the API runs it after the answer (``lint_findings``)
#: and the client does not wait for it (~0.2 ms at 105K tokens).
FORWARD_PASSES: tuple[PassSpec, ...] = tuple(p for p in PASSES if p.name != "lint_context")


def lint_findings(ctx: Context, policy: Policy) -> list[Decision]:
    """The lint pass's findings on an assembled context, run on its own (see ``FORWARD_PASSES``)."""
    lint = _lint_policy(policy)
    if not lint.enabled:
        return []
    return lint_context(ctx, lint)[1]


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
        if not pass_policy.enabled:
            continue
        try:
            current, made = spec.run(current, pass_policy)
        except VentanaError:  # a request the pass proves wrong (a malformed document, one that cannot fit): a 4xx
            raise
        except Exception as exc:  # a bug in one pass must not cost the client its answer
            failure = Decision(
                spec.name,
                "pass_failed",
                reason=f"the pass raised {type(exc).__name__}: {exc}; forwarding the original request",
                detail={"error": type(exc).__name__},
            )
            log.exception("assembly pass %s failed; forwarding the original", spec.name)
            return Assembly(ctx, ctx, (*decisions, failure), reverted=True)
        decisions.extend(made)
    if current is ctx:
        return Assembly(ctx, ctx, tuple(decisions))
    if current.messages is ctx.messages and current.tools is ctx.tools:
        return Assembly(ctx, current, tuple(decisions))  # only parameters changed: nothing to verify
    keep_rounds = policy.compaction.keep_recent_rounds if policy.compaction.enabled else None
    problems = verify_assembly(ctx, current, decisions, keep_rounds=keep_rounds)
    if problems:
        failure = Decision(
            "verify_assembly",
            "reverted",
            reason="assembled request failed the safety check; forwarding the original: " + "; ".join(problems),
            detail={"problems": problems},
        )
        return Assembly(ctx, ctx, (*decisions, failure), reverted=True)
    return Assembly(ctx, current, tuple(decisions))
