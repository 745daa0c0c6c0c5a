"""One plan when a client's own context management and the gateway's policy both want to compact.

A client may ask for context management in the request (OpenAI's ``context_management`` compaction with its
``compact_threshold``; Anthropic's ``clear_tool_uses`` with its ``keep`` and ``exclude_tools``). The door does
what the client asked (``api/responses_compact.py``, ``formats/anthropic_context_edits.py``); the gateway's
own compaction then runs over the result. Two independent plans would disagree: the gateway compacting at
its 55 % when the client said 4,000 tokens, or clearing a result the client said to keep. So the request's
policy is the gateway's with the client's terms written in (``planned_policy``): the client's threshold is the
compaction threshold for this request, the client's ``keep`` raises the rounds kept whole, its
``exclude_tools`` are never cleared; the gateway's safety rules (the head and task untouched, a call never
split from its result, the summariser's checks) hold as always. The request's record gets one decision
naming both sides (``plan_decision``), so an operator sees who asked for what and what was done.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from gateway.assembly.compaction_policy import CompactionPolicy
from gateway.assembly.context import Decision
from gateway.assembly.policy import Policy

PASS = "context_management"
#: The gateway's own passes that compact; their decisions are the gateway's side of the plan.
GATEWAY_PASSES = ("clear_tool_results", "compact_history")
_ACTED = ("cleared", "compacted", "checkpoint_reused")


@dataclass(frozen=True, slots=True)
class ClientAsk:
    """What the client asked of context management on one request, and what the door did with it."""

    api: str  # "responses" or "messages": whose parameters ``params`` are
    params: Mapping[str, Any]  # as the client sent them
    done: Mapping[str, Any]  # what the door did: {"compacted": ...} or {"applied_edits": [...]}
    threshold_tokens: int | None = None  # the client's compaction threshold, when it set one
    keep_tool_uses: int | None = None  # the newest tool uses the client said to keep
    exclude_tools: tuple[str, ...] = field(default=())

    @property
    def acted(self) -> bool:
        return bool(self.done.get("compacted") or self.done.get("applied_edits"))


def planned_policy(policy: Policy, ask: ClientAsk, window: int) -> Policy:
    """``policy`` with the client's terms in it for this request (the watermarks below the threshold scaled
    with it, so they stay in order)."""
    c = policy.compaction
    update: dict[str, Any] = {}
    if ask.threshold_tokens and window > 0:
        share = min(1.0, ask.threshold_tokens / window)
        update |= {
            "threshold": share,
            "target": share * c.target / c.threshold,
            "prepare_at": share * c.prepare_at / c.threshold,
        }
    if ask.keep_tool_uses:
        update["keep_recent_rounds"] = max(c.keep_recent_rounds, ask.keep_tool_uses)
        update["keep_tool_results"] = max(c.keep_tool_results, ask.keep_tool_uses)
    if ask.exclude_tools:
        update["never_clear"] = tuple(dict.fromkeys((*c.never_clear, *ask.exclude_tools)))
    if not update:
        return policy
    return policy.model_copy(update={"compaction": c.model_copy(update=update)})


def plan_decision(
    ask: ClientAsk, policy: Policy, planned: Policy, window: int, decisions: Sequence[Decision]
) -> Decision:
    """The one decision recording the plan: the client's ask and the door's work, the gateway's terms as
    configured and as planned, and what its passes did."""
    mine = [d for d in decisions if d.pass_name in GATEWAY_PASSES]
    gateway_acted = any(d.action in _ACTED for d in mine)
    action = {
        (True, True): "client_and_gateway",
        (True, False): "client",
        (False, True): "gateway",
        (False, False): "none_needed",
    }[(ask.acted, gateway_acted)]
    c, p = policy.compaction, planned.compaction
    gateway = {
        "configured": _terms(c, window),
        "planned": _terms(p, window),
        "passes": [{"pass": d.pass_name, "action": d.action} for d in mine],
    }
    client = {"api": ask.api, "params": dict(ask.params), **dict(ask.done)}
    before = next((d.tokens_before for d in mine if d.action in _ACTED), 0)
    after = next((d.tokens_after for d in reversed(mine) if d.action in _ACTED), 0)
    reason = "the client's context management and the gateway's policy, planned together"
    return Decision(PASS, action, before, after, reason, {"client": client, "gateway": gateway})


def _terms(c: CompactionPolicy, window: int) -> dict[str, Any]:
    return {
        "threshold_tokens": int(c.threshold * window),
        "keep_recent_rounds": c.keep_recent_rounds,
        "keep_tool_results": c.keep_tool_results,
        "never_clear": list(c.never_clear),
    }


def responses_ask(threshold: int, compacted: bool, tokens_before: int, tokens_after: int) -> ClientAsk:
    """A ``context_management`` compaction entry (``threshold`` 0: none given, the gateway's own)."""
    params = {"type": "compaction", **({"compact_threshold": threshold} if threshold else {})}
    done = {"compacted": compacted, "tokens_before": tokens_before, "tokens_after": tokens_after}
    return ClientAsk("responses", params, done, threshold_tokens=threshold or None)


def messages_ask(config: Any, applied: Sequence[Mapping[str, Any]]) -> ClientAsk:
    """Anthropic's ``context_management`` (already checked by the edits it was applied with): the newest
    ``clear_tool_uses`` edit's ``keep`` and ``exclude_tools`` are the terms the gateway's clearing honours."""
    edits = config.get("edits") if isinstance(config, Mapping) else None
    keep: int | None = None
    exclude: tuple[str, ...] = ()
    for edit in edits if isinstance(edits, list) else ():
        if isinstance(edit, Mapping) and edit.get("type") == "clear_tool_uses_20250919":
            given = edit.get("keep")
            value = given.get("value") if isinstance(given, Mapping) else None
            keep = value if isinstance(value, int) and not isinstance(value, bool) else 3  # Anthropic's default
            names = edit.get("exclude_tools")
            exclude = tuple(str(n) for n in names) if isinstance(names, list) else ()
    params = dict(config) if isinstance(config, Mapping) else {}
    return ClientAsk("messages", params, {"applied_edits": list(applied)}, keep_tool_uses=keep, exclude_tools=exclude)
