"""Restate the critical rules at the end of the context, within a small token budget.

Attention is U-shaped: the start and the end of a long context are remembered best.
A rule the model must not break lives at the start (in the system prompt) and is
restated in the trailing reminder. Only the critical ones: restating everything fills
the end edge and dilutes again, so the restated lines fit ``budget_tokens`` by priority
and the decision names the rules left out.

Rules come from the config (``rules``: literal ``text`` or a ``pattern`` matched in the
system prompt, each with a ``priority``) and from ``<critical>...</critical>`` marks in
system/developer messages (``<critical priority="3">`` sets a priority; default 1).

A literal config rule that the system prompt does not contain is added at the end of the
first system message (or as a new first system message) when ``ensure_at_start`` is on,
so it is at both edges; that edit is declared with ``changes_system``.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from pydantic import BaseModel, ConfigDict, model_validator

from gateway.assembly.context import Context, Decision, Message
from gateway.assembly.message_text import is_system, system_messages, text_of
from gateway.assembly.policy import PassPolicy
from gateway.assembly.verify_assembly import is_gateway_block
from gateway.object_memo import ObjectMemo

RULE_KIND = "critical_rule"
DEFAULT_RULE_BUDGET = 200
_MARK_RX = re.compile(r"<critical(?:\s+priority\s*=\s*[\"']?(-?\d+)[\"']?)?\s*>(.*?)</critical>", re.S | re.I)


class RuleSpec(BaseModel):
    """One configured rule: exactly one of ``text`` (literal) or ``pattern`` (regex on the system prompt)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    text: str | None = None
    pattern: str | None = None
    priority: int = 1
    name: str | None = None

    @model_validator(mode="after")
    def _one_of(self) -> RuleSpec:
        if (self.text is None) == (self.pattern is None):
            raise ValueError("a rule needs exactly one of 'text' or 'pattern'")
        if self.pattern is not None:
            try:
                re.compile(self.pattern)
            except re.error as exc:
                raise ValueError(f"rule pattern {self.pattern!r} is not a valid regex: {exc}") from exc
        return self


class RulesPolicy(PassPolicy):
    rules: tuple[RuleSpec, ...] = ()
    budget_tokens: int = DEFAULT_RULE_BUDGET
    marked: bool = True
    ensure_at_start: bool = True


@dataclass(frozen=True, slots=True)
class Rule:
    text: str
    priority: int
    source: str  # "config", "pattern" or "marked"
    order: int


#: ``policy -> {system prompt: its rules}``: a session's system prompt is the same text every turn, and
#: both this pass and lint look for its rules (regular expressions over the prompt, ~10-25 us a look).
_FOUND: ObjectMemo[dict[str, tuple[Rule, ...]]] = ObjectMemo(limit=64)
_FOUND_PER_POLICY = 256


def find_rules(messages: Sequence[Message], policy: RulesPolicy) -> list[Rule]:
    """Every critical rule of this request, highest priority first, then in order of declaration."""
    system = "\n".join(text_of(m.get("content")) for m in system_messages(messages) if not is_gateway_block(m))
    by_text = _FOUND.get(policy)
    if by_text is None:
        by_text = _FOUND.put(policy, {})
    found = by_text.get(system)
    if found is None:
        if len(by_text) >= _FOUND_PER_POLICY:
            by_text.clear()
        found = by_text[system] = tuple(_rules_in(system, policy))
    return list(found)


def _rules_in(system: str, policy: RulesPolicy) -> list[Rule]:
    found: list[Rule] = []
    for spec in policy.rules:
        if spec.text is not None:
            found.append(Rule(spec.text.strip(), spec.priority, "config", len(found)))
        else:
            for match in re.finditer(spec.pattern or "", system):
                found.append(Rule(match.group(0).strip(), spec.priority, "pattern", len(found)))
    if policy.marked:
        for match in _MARK_RX.finditer(system):
            priority = int(match.group(1)) if match.group(1) else 1
            found.append(Rule(" ".join(match.group(2).split()), priority, "marked", len(found)))
    unique: dict[str, Rule] = {}
    for rule in found:
        if rule.text and rule.text not in unique:
            unique[rule.text] = rule
    return sorted(unique.values(), key=lambda r: (-r.priority, r.order))


def _ensure_at_start(messages: tuple[Message, ...], missing: list[str]) -> tuple[Message, ...]:
    """Append the missing literal rules to the first system message (or add one at the front)."""
    block = "\n".join(missing)
    for i, m in enumerate(messages):
        if is_system(m) and isinstance(m.get("content"), str):
            new = {**m, "content": f"{m['content'].rstrip()}\n\n{block}"}
            return (*messages[:i], new, *messages[i + 1 :])
        if not is_system(m):
            break
    return ({"role": "system", "content": block}, *messages)


def restate_rules(ctx: Context, policy: RulesPolicy) -> tuple[Context, list[Decision]]:
    """Restate the highest-priority critical rules in the reminder, within ``budget_tokens``.

    Never removes a rule from the system prompt; may add a missing literal config rule
    there (``ensure_at_start``). Annotates ``critical_rules`` (all) and ``restated_rules``.
    """
    rules = find_rules(ctx.messages, policy)
    if not rules:
        return ctx, []
    counter = ctx.env.counter
    kept: list[Rule] = []
    omitted: list[Rule] = []
    used = 0
    for rule in rules:
        cost = counter.text(f"{RULE_KIND}: {rule.text}\n")
        if used + cost <= policy.budget_tokens:
            kept.append(rule)
            used += cost
        else:
            omitted.append(rule)
    decisions: list[Decision] = []
    messages = ctx.messages
    system_text = "\n".join(text_of(m.get("content")) for m in system_messages(messages))
    missing = [r.text for r in rules if r.source == "config" and r.text not in system_text]
    changes = bool(policy.ensure_at_start and missing)
    if changes:
        messages = _ensure_at_start(messages, missing)
    if kept:
        decisions.append(
            Decision(
                "restate_rules",
                "restated",
                tokens_before=0,
                tokens_after=used,
                reason=f"restated {len(kept)} critical rule(s) at the end of the context",
                detail={
                    "rules": [r.text for r in kept],
                    "added_to_start": missing if changes else [],
                    "changes_system": changes,
                },
            )
        )
    if omitted:
        decisions.append(
            Decision(
                "restate_rules",
                "omitted",
                reason=f"{len(omitted)} lower-priority rule(s) did not fit the {policy.budget_tokens}-token budget",
                detail={"rules": [r.text for r in omitted], "changes_system": changes and not kept},
            )
        )
    lines = tuple((RULE_KIND, r.text) for r in kept)
    new = ctx.replace(messages=messages, reminder=(*ctx.reminder, *lines)).annotate(
        critical_rules=tuple(r.text for r in rules), restated_rules=tuple(r.text for r in kept)
    )
    return new, decisions
