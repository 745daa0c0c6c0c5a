"""The assembly pipeline: the ordered list of passes every chat request goes through.

Every behaviour of the gateway's context engineering is one hop from ``PASSES``.
``assemble`` runs the enabled passes in order, then the final safety check: if the
assembled request is not a faithful rewrite of the original (a tool call split from
its result, the last user turn altered, ...), the original goes out unchanged and the
failure is recorded. The gateway never makes a request worse than the client sent it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from gateway.assembly.attach_documents import attach_documents
from gateway.assembly.clear_tool_results import clear_tool_results, condense_tail
from gateway.assembly.compact_history import compact_history, fit_newest
from gateway.assembly.compaction_layout import head_end
from gateway.assembly.compaction_policy import CompactionPolicy, for_window
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
from gateway.assembly.verify_assembly import newest_round_start, verify_assembly
from gateway.errors import ContextTooLong, VentanaError
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
            "volatile_learns": policy.volatile.enabled and policy.volatile.learn,
        }
    )


# Order matters (each pass slots in at its line as it lands):
# 1. move_volatile           strips per-turn values from the prefix first, so nothing after sees them as stable
# 2. attach_documents        documents are placed before the question; later passes count them
# 3. prune_tools             tool set is fixed before compaction counts the prompt
# 4. clear_tool_results      cheap clearing before any summarising
# 5. compact_history         needs the final tools and documents to know the prompt size
# 5a. condense_tail          a summary that left the request over its target: the tail's older rounds condensed
#                            (results, long reasoning, long arguments); the newest round's reasoning past 1/4
# 5b. shrink_oversize        only a single huge message can still overflow once history is compacted; it runs
#                            before the small dynamic-tail passes so its 80 % line leaves them (and the reply) room
# 6. recall_memory           recalled passages go just before the question, after compaction decided what aged out
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


#: Passes that finish a plan without shaping it (reminder, breakpoints, cache hints, the gate): a
#: fallback plan taken from an earlier pass still gets them, so per-turn values moved out of the
#: prefix still reach the model and the provider's cache key is still set.
FINISHING_PASSES = frozenset(
    {"restate_rules", "render_reminder", "place_cache_breakpoints", "hint_cache", "lint_context"}
)


@dataclass(frozen=True, slots=True)
class _Snapshot:
    """The plan as it stood after a pass that changed it: a candidate for the fallback."""

    ctx: Context
    decisions: int  # how many decisions were made up to it
    after: str  # the pass it was taken after ("" for the client's request)
    index: int  # that pass's position in ``passes``


def assemble(ctx: Context, policy: Policy, passes: tuple[PassSpec, ...] = PASSES) -> Assembly:
    """Run every enabled pass over ``ctx``, then the final checks; fall back to the best plan that fits.

    One plan per request: the passes share one budget (``compaction_layout``) and one definition of
    what stays verbatim (``verify_assembly``). When the plan still fails the safety check, a pass
    fails, or the plan is over the model's window, the best earlier stage of the same plan that
    passes the check and fits the window is sent (clearing alone, say), finished by the passes that
    do not shape it (reminder, cache hints), and a ``reverted`` decision says why and what was sent.
    Never an original over the window: when no stage fits, the request is refused with a 400 that
    says what would fit (``ContextTooLong``).
    """
    current = ctx
    decisions: list[Decision] = []
    snapshots = [_Snapshot(ctx, 0, "", -1)]
    problems: list[str] = []
    too_long: ContextTooLong | None = None
    for k, spec, pass_policy in _enabled(policy, passes, ctx.env.context_window):
        try:
            current, made = spec.run(current, pass_policy)
        except ContextTooLong as exc:  # a pass that could not make it fit: an earlier stage may still
            too_long = exc
            problems = [f"{spec.name}: {exc.message}"]
            break
        except VentanaError:  # a request the pass proves wrong (a malformed document, a strict lint): a 4xx
            raise
        except Exception as exc:  # a bug in one pass must not cost the client its answer
            log.exception("assembly pass %s failed; falling back to the best plan before it", spec.name)
            problems = [f"the pass {spec.name} raised {type(exc).__name__}: {exc}"]
            failure = Decision(
                spec.name,
                "pass_failed",
                reason=f"the pass raised {type(exc).__name__}: {exc}; falling back to the best plan before it",
                detail={"error": type(exc).__name__},
            )
            return _fallback(
                ctx, policy, passes, snapshots, decisions, problems, None, skip_last=False, extra=[failure]
            )
        decisions.extend(made)
        if current is not snapshots[-1].ctx and spec.name not in FINISHING_PASSES:
            snapshots.append(_Snapshot(current, len(decisions), spec.name, k))
    if too_long is not None:
        return _fallback(ctx, policy, passes, snapshots, decisions, problems, too_long, skip_last=False)
    unchanged = current.messages is ctx.messages and current.tools is ctx.tools
    if unchanged and policy.compaction.enabled and not ctx.prompt_tokens_within(ctx.env.context_window):
        over = [f"the request has {ctx.prompt_tokens()} prompt tokens, over the {ctx.env.context_window}-token window"]
        return _fallback(ctx, policy, passes, snapshots, decisions, over, None, skip_last=False)  # never forwarded over
    if current is ctx:
        return Assembly(ctx, ctx, tuple(decisions))
    if unchanged:
        return Assembly(ctx, current, tuple(decisions))  # only parameters changed: nothing to verify
    problems = _check(ctx, current, decisions, policy)
    if problems:
        return _fallback(ctx, policy, passes, snapshots, decisions, problems, None, skip_last=True)
    return Assembly(ctx, current, tuple(decisions))


_Enabled = tuple[tuple[int, PassSpec, PassPolicy], ...]
#: policy -> (id of the passes, window) -> (the passes, the enabled ones with their policies sized to
#: the window). The policy is the gateway's (frozen) settings on every request but those a client's
#: context management plans; resolving twelve passes' policies was ~10 us a request.
_ENABLED: ObjectMemo[dict[tuple[int, int], tuple[tuple[PassSpec, ...], _Enabled]]] = ObjectMemo(limit=64)


def _enabled(policy: Policy, passes: tuple[PassSpec, ...], window: int) -> _Enabled:
    """The passes that run under ``policy``, in order, with their position and their policy for the window."""
    by_passes = _ENABLED.get_or(policy, lambda _: {})
    hit = by_passes.get((id(passes), window))
    if hit is not None and hit[0] is passes:
        return hit[1]
    enabled = tuple(
        (k, spec, pass_policy)
        for k, spec in enumerate(passes)
        if (pass_policy := _sized(spec.policy(policy), window)).enabled
    )
    if len(by_passes) >= 16:  # pass lists made per call (tests, benchmarks' wrapped specs): bounded
        by_passes.clear()
    by_passes[(id(passes), window)] = (passes, enabled)
    return enabled


def _sized(pass_policy: PassPolicy, window: int) -> PassPolicy:
    return for_window(pass_policy, window) if isinstance(pass_policy, CompactionPolicy) else pass_policy


def _for_window(pass_policy: PassPolicy, ctx: Context) -> PassPolicy:
    """Compaction's policy sized to the model's window (``compaction_policy.for_window``)."""
    return _sized(pass_policy, ctx.env.context_window)


def _keep_rounds(policy: Policy) -> int | None:
    return policy.compaction.keep_recent_rounds if policy.compaction.enabled else None


def _check(
    original: Context, plan: Context, decisions: Sequence[Decision], policy: Policy, keep_rounds: int | None = None
) -> list[str]:
    """What keeps ``plan`` from being sent: the safety check's problems, and a prompt over the window."""
    keep = _keep_rounds(policy) if keep_rounds is None else keep_rounds
    problems = verify_assembly(original, plan, decisions, keep_rounds=keep)
    tokens, window = plan.prompt_tokens(), plan.env.context_window
    if tokens > window:
        problems = [*problems, f"the assembled request has {tokens} prompt tokens, over the {window}-token window"]
    return problems


def _finish(stage: Context, policy: Policy, passes: tuple[PassSpec, ...], after: int) -> tuple[Context, list[Decision]]:
    """Run the finishing passes that come after position ``after`` over an earlier stage of the plan."""
    made: list[Decision] = []
    for spec in passes[after + 1 :]:
        if spec.name not in FINISHING_PASSES or spec.name == "lint_context":
            continue
        pass_policy = _for_window(spec.policy(policy), stage)
        if not pass_policy.enabled:
            continue
        try:
            stage, more = spec.run(stage, pass_policy)
        except VentanaError:
            raise
        except Exception:  # the plan without that finish is still a valid plan
            log.exception("finishing pass %s failed on a fallback plan", spec.name)
            continue
        made.extend(more)
    return stage, made


def _fallback(
    ctx: Context,
    policy: Policy,
    passes: tuple[PassSpec, ...],
    snapshots: list[_Snapshot],
    decisions: list[Decision],
    problems: list[str],
    too_long: ContextTooLong | None,
    *,
    skip_last: bool,
    extra: Sequence[Decision] = (),
) -> Assembly:
    """The latest stage of the plan that passes the check and fits the window, with a ``reverted`` decision.

    ``skip_last``: the last stage is the plan that just failed the check. The client's request itself is
    the last candidate, and only while it fits the window; when nothing fits, the request is refused.
    """
    window = ctx.env.context_window
    candidates = snapshots[:-1] if skip_last and len(snapshots) > 1 else snapshots
    for snap in reversed(candidates):
        if snap.after == "":
            if ctx.prompt_tokens() > window:
                continue
            return _reverted(ctx, ctx, [*decisions, *extra], problems, "the client's request", ctx.prompt_tokens())
        kept = [*decisions[: snap.decisions], *extra]
        stage, finished = _finish(snap.ctx, policy, passes, snap.index)
        made = [*kept, *finished]
        if _check(ctx, stage, made, policy):
            continue
        return _reverted(ctx, stage, made, problems, f"the plan as it stood after {snap.after}", stage.prompt_tokens())
    last = _fit_newest(ctx, policy, passes, snapshots, decisions, extra)
    if last is not None:
        stage, made = last
        return _reverted(
            ctx, stage, made, problems, "one summary of everything before the newest round", stage.prompt_tokens()
        )
    raise _refusal(ctx, policy, problems, too_long)


def _fit_newest(
    ctx: Context,
    policy: Policy,
    passes: tuple[PassSpec, ...],
    snapshots: list[_Snapshot],
    decisions: list[Decision],
    extra: Sequence[Decision],
) -> tuple[Context, list[Decision]] | None:
    """Head, one summary of all before the newest round, the newest round: the plan before a refusal.

    Built on the first stage (after ``move_volatile``, so per-turn values still go to the reminder)."""
    if not policy.compaction.enabled:
        return None
    first = next((s for s in snapshots if s.after == "move_volatile"), snapshots[0])
    reserve = 0
    for _ in range(3):  # the finishing passes add the reminder: leave room for what they added last time
        made = fit_newest(first.ctx, for_window(policy.compaction, ctx.env.context_window), reserve)
        if made is None:
            return None
        stage, compacted = made
        kept = [*decisions[: first.decisions], *extra, *compacted]
        planned = stage.prompt_tokens()
        stage, finished = _finish(stage, policy, passes, first.index)
        if not _check(ctx, stage, [*kept, *finished], policy, keep_rounds=1):
            return stage, [*kept, *finished]
        added = stage.prompt_tokens() - planned
        if added <= 0 or stage.prompt_tokens() <= ctx.env.context_window:
            return None  # not a matter of room: the check found something else
        reserve += added + 8
    return None


def _reverted(
    ctx: Context, sent: Context, decisions: Sequence[Decision], problems: list[str], what: str, tokens: int
) -> Assembly:
    """``sent`` with a ``reverted`` decision. When a stage of the plan goes, ``decisions`` are exactly those
    that reached it (``detail.undoes: []``: the revert undoes none of them, ``decision_tally``); when the
    client's own request goes, every decision before the revert is undone."""
    keeps_plan = sent is not ctx
    failure = Decision(
        "verify_assembly",
        "reverted",
        tokens_before=ctx.prompt_tokens(),
        tokens_after=tokens,
        reason=f"the assembled request could not be sent ({'; '.join(problems)}); sent instead: {what}",
        detail={
            "problems": problems,
            "sent": what,
            "sent_tokens": tokens,
            "context_window": ctx.env.context_window,
            **({"undoes": []} if keeps_plan else {}),
        },
    )
    return Assembly(ctx, sent, (*decisions, failure), reverted=True)


def _refusal(ctx: Context, policy: Policy, problems: list[str], too_long: ContextTooLong | None) -> ContextTooLong:
    """The 400 when no stage of the plan fits: what the request needs and what would fit."""
    counter, messages, window = ctx.env.counter, ctx.messages, ctx.env.context_window
    total = ctx.prompt_tokens()
    newest = max(newest_round_start(messages), 0)
    head = counter.request(messages[: head_end(messages)], ctx.tools)
    last = counter.messages(messages[newest:])
    message = (
        f"the request has {total} prompt tokens and model {ctx.env.model!r} accepts at most {window}; "
        f"the system prompt, tool definitions and task take {head} tokens and the newest round {last}, "
        f"so at most {max(0, window - head)} tokens of conversation after the task would fit"
    )
    if problems:
        message += "; the gateway could not fit it: " + "; ".join(problems)
    return (
        ContextTooLong(message, param="messages") if too_long is None else ContextTooLong(message, param=too_long.param)
    )
