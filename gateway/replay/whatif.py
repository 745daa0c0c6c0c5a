"""Re-run the assembly pipeline over recorded or imported traffic under another policy, offline.

Each conversation's original requests are assembled turn by turn, threading the session
state exactly as the live gateway does, and each assembled request is accounted against
a provider cache model (``providersim.cache_models``) instead of being sent anywhere.
The result per turn: tokens sent, cached reads and writes, tokens per component, tokens
saved by pass, compactions, tool-set changes, lint findings and an estimated cost.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from gateway.assembly.budget_report import budget_report
from gateway.assembly.context import Context, Env, SessionState, Summarizer
from gateway.assembly.pipeline import assemble
from gateway.assembly.plan_compaction import adopt_checkpoints, plan_compaction, prepare
from gateway.assembly.policy import Policy
from gateway.assembly.request import context_from_body
from gateway.assembly.tool_payoff import cache_ratio
from gateway.decision_tally import tally_decisions
from gateway.memos import Memos
from gateway.providersim.cache_models import cache_model_for, default_kind, prompt_blocks
from gateway.replay.transcripts import Conversation
from gateway.tokens import counter_for, encoding_for_model
from gateway.upstream.model_info import ModelInfo, model_info


@dataclass(frozen=True, slots=True)
class TurnResult:
    conversation: str
    turn: int
    tokens_original: int
    tokens_sent: int
    cached_read: int
    cache_write: int
    cost: float
    cost_original: float
    components: Mapping[str, int]
    saved_by_pass: Mapping[str, int]
    compactions: int = 0
    tool_set_changes: int = 0
    lint_findings: int = 0
    reverted: bool = False


@dataclass(slots=True)
class WhatIfResult:
    policy_name: str
    cache_kind: str
    turns: list[TurnResult] = field(default_factory=list)

    def totals(self) -> dict[str, float]:
        saved: Counter[str] = Counter()
        for t in self.turns:
            saved.update(t.saved_by_pass)
        out: dict[str, float] = {
            "turns": len(self.turns),
            "tokens_original": sum(t.tokens_original for t in self.turns),
            "tokens_sent": sum(t.tokens_sent for t in self.turns),
            "cached_read": sum(t.cached_read for t in self.turns),
            "cache_write": sum(t.cache_write for t in self.turns),
            "compactions": sum(t.compactions for t in self.turns),
            "tool_set_changes": sum(t.tool_set_changes for t in self.turns),
            "lint_findings": sum(t.lint_findings for t in self.turns),
            "cost": round(sum(t.cost for t in self.turns), 6),
            "cost_original": round(sum(t.cost_original for t in self.turns), 6),
        }
        out["cache_hit_ratio"] = round(out["cached_read"] / out["tokens_sent"], 4) if out["tokens_sent"] else 0.0
        for name, value in sorted(saved.items()):
            out[f"saved:{name}"] = value
        return out


def price(info: ModelInfo, sent: int, read: int, write: int) -> float:
    """Estimated input cost: uncached tokens at the input price, reads and writes at theirs."""
    fresh = max(0, sent - read - write)
    return (
        fresh * info.input_cost_per_token
        + read * info.cache_read_cost_per_token
        + write * info.cache_write_cost_per_token
    )


def _count(decisions: Iterable[Mapping[str, Any]], pass_name: str, action: str) -> int:
    return sum(1 for d in decisions if d["pass"] == pass_name and d["action"] == action)


def _changes(decisions: Iterable[Mapping[str, Any]]) -> int:
    """Tool-set changes, the session's first set left out: it breaks no cache that existed."""
    return sum(
        1
        for d in decisions
        if d["pass"] == "prune_tools" and d["action"] == "tool_set_changed" and not (d.get("detail") or {}).get("first")
    )


def _prepared_ahead(ctx: Context, assembled: Context, policy: Policy, summarizer: Summarizer | None) -> SessionState:
    """The session state the next turn starts from, as the gateway leaves it: the assembled turn's, with the
    checkpoint the gateway prepares ahead (past ``prepare_at``) adopted. Without it a replay compacted on other
    turns than the served session did (issue 37: 3 compactions where the session had 2)."""
    state = replace(assembled.session, turn=ctx.session.turn + 1)
    plan = plan_compaction(ctx, assembled, policy.compaction)
    if plan is None:
        return state
    return adopt_checkpoints(
        state, [prepare(plan, assembled, policy.compaction, summarizer).checkpoint], policy.compaction
    )


def run_whatif(
    conversations: Iterable[Conversation],
    policy: Policy,
    *,
    model: str,
    litellm_model: str | None = None,
    context_window: int | None = None,
    cache_kind: str | None = None,
    summarizer: Summarizer | None = None,
    policy_name: str = "policy",
    progress: Callable[[int], None] | None = None,
) -> WhatIfResult:
    """Assemble every turn of every conversation under ``policy`` and account it offline."""
    litellm_name = litellm_model or model
    info = model_info(litellm_name, context_window)
    kind = cache_kind or default_kind(litellm_name)
    counter = counter_for(encoding_for_model(litellm_name))
    result = WhatIfResult(policy_name=policy_name, cache_kind=kind)
    ratio = cache_ratio(info.input_cost_per_token, info.cache_read_cost_per_token)
    memos = Memos()  # this replay's own caches, as a gateway's: turns resend the same messages
    for conversation in conversations:
        cache = cache_model_for(kind, litellm_name)
        baseline = cache_model_for(kind, litellm_name)
        state = SessionState(session_id=conversation.id)
        for turn, body in enumerate(conversation.requests, start=1):
            env = Env(
                counter=counter,
                context_window=info.context_window,
                model=model,
                provider=kind,
                summarizer=summarizer,
                cache_price_ratio=ratio,
                memos=memos,
            )
            ctx = context_from_body(body, env, state)
            assembly = assemble(ctx, policy)
            state = _prepared_ahead(ctx, assembly.assembled, policy, summarizer)
            sent_ctx = assembly.assembled
            blocks = prompt_blocks(counter, sent_ctx.messages, sent_ctx.tools)
            accounted = cache.account(blocks)
            original_blocks = prompt_blocks(counter, ctx.messages, ctx.tools)
            original_accounted = baseline.account(original_blocks)
            decisions = [d.to_dict() for d in assembly.decisions]
            # As the live gateway counts them (decision_tally): what a revert undid saved nothing and
            # compacted nothing, so a reverted turn is no compaction here either.
            tally = tally_decisions(decisions)
            saved: Counter[str] = Counter()
            for name in {*tally.tokens_saved, *tally.tokens_added}:
                saved[name] = tally.tokens_saved[name] - tally.tokens_added[name]
            sent = sum(len(b) for b in blocks.blocks)
            original = sum(len(b) for b in original_blocks.blocks)
            result.turns.append(
                TurnResult(
                    conversation=conversation.id,
                    turn=turn,
                    tokens_original=original,
                    tokens_sent=sent,
                    cached_read=accounted.read,
                    cache_write=accounted.write,
                    cost=price(info, sent, accounted.read, accounted.write),
                    cost_original=price(info, original, original_accounted.read, original_accounted.write),
                    components={
                        ln.component: ln.tokens for ln in budget_report(sent_ctx).lines if ln.component != "reserve"
                    },
                    saved_by_pass=dict(saved),
                    compactions=tally.compactions,
                    tool_set_changes=_changes(decisions) if not tally.reverted else 0,
                    lint_findings=_count(decisions, "lint_context", "finding"),
                    reverted=assembly.reverted,
                )
            )
            if progress is not None:
                progress(1)
    return result
