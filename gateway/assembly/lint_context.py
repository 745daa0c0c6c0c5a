"""Check the assembled context against the validation gate of the context-window skill.

The gate (skill card "Gate de validación"), one check each:

- ``volatile_in_prefix``: the prefix (system/developer messages, tool descriptions)
  holds no value that is per-turn on sight (a timestamp, a request id, a "current time"
  label, config patterns; ``volatile_patterns.PER_TURN_PATTERNS``);
- ``volatile_in_tools``: the same in a tool description, a warning by default: the gateway
  never edits tool definitions, so only the client can move it;
- ``dynamic_tail_last``: the dynamic state is one ``<reminder>`` block at the very end
  (no unrendered reminder lines, no reminder in the middle, no placeholder whose value
  is missing);
- ``critical_rules_at_edges``: each critical rule is at the start and restated at the
  end, never only in the middle (a rule left out of the reminder by the budget is a
  warning);
- ``compaction_threshold``: a compaction threshold is configured;
- ``compaction_edges``: a summary block does not replace the edges (system prompt,
  first user goal). A summary after the last user turn is an agent loop's older rounds; that
  the last user turn itself went out unaltered is the safety check's (``verify_assembly``),
  which compares it with the client's.

Each finding is a Decision (``finding``, with ``check`` and ``severity``). The pass
never changes the context and never raises: ``api/`` rejects the request in strict mode.
The fields after ``severities`` are filled by the pipeline from the other passes'
policies, so the gate checks exactly what the config declares.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Literal

from pydantic import Field

from gateway.assembly.context import Context, Decision
from gateway.assembly.message_text import is_system, system_messages, text_of
from gateway.assembly.move_volatile import PLACEHOLDER_RX, moved_patterns, pattern_spans, per_turn_patterns
from gateway.assembly.policy import PassPolicy
from gateway.assembly.render_reminder import parse_reminder
from gateway.assembly.restate_rules import RuleSpec, RulesPolicy, find_rules
from gateway.assembly.verify_assembly import client_user_indices, is_gateway_block
from gateway.history_fold import index_fold
from gateway.object_memo import ObjectMemo

Severity = Literal["error", "warning", "off"]
CHECKS: tuple[str, ...] = (
    "volatile_in_prefix",
    "volatile_in_tools",
    "dynamic_tail_last",
    "critical_rules_at_edges",
    "compaction_threshold",
    "compaction_edges",
)
_ERROR: Severity = "error"
_WARNING: Severity = "warning"
DEFAULT_SEVERITIES: Mapping[str, Severity] = {
    **dict.fromkeys(CHECKS, _ERROR),
    "compaction_threshold": _WARNING,
    "volatile_in_tools": _WARNING,  # the client's to fix: the gateway never edits a tool definition
}


class LintPolicy(PassPolicy):
    """``mode: strict`` makes the API reject a request with an ``error`` finding (400 ``LintViolation``)."""

    mode: Literal["warn", "strict"] = "warn"
    severities: dict[str, Severity] = Field(default_factory=dict)
    volatile_patterns: dict[str, str] = Field(default_factory=dict)
    rules: tuple[RuleSpec, ...] = ()
    compaction_threshold: float | None = None
    #: ``move_volatile`` runs and learns: a built-in per-turn value is a finding only once the session
    #: saw it change (before that it is cacheable where it is, and the pass leaves it there on purpose).
    volatile_learns: bool = False

    def severity(self, check: str) -> Severity:
        return self.severities.get(check, DEFAULT_SEVERITIES.get(check, "error"))


Finding = tuple[str, str, str]  # (check, message, default severity override or "")


def _prefix_values(ctx: Context, policy: LintPolicy) -> list[Finding]:
    extra = tuple(sorted(policy.volatile_patterns.items()))
    patterns = moved_patterns(extra, ctx.session.volatile_spans) if policy.volatile_learns else per_turn_patterns(extra)
    texts = [
        ("volatile_in_prefix", text_of(m.get("content")))
        for m in system_messages(ctx.messages)
        if not is_gateway_block(m)
    ]
    texts += [("volatile_in_tools", str((t.get("function") or {}).get("description") or "")) for t in ctx.tools or ()]
    found: list[Finding] = []
    for check, text in texts:
        where = "the prefix" if check == "volatile_in_prefix" else "a tool description (the client's to move)"
        for start, end, name in pattern_spans(text, patterns):
            found.append((check, f"per-turn value ({name}) in {where}: {text[start:end]!r}", ""))
    return found


#: Where the reminders and summaries are: per chunk of history
#: (``gateway.history_fold``), so linting a long agent turn walks only what is new.
_reminder_index = index_fold(lambda m: parse_reminder(m.get("content")) is not None)
_summary_index = index_fold(lambda m: str(m.get("content") or "").startswith("<summary"))
#: The rules policy of each lint policy (frozen, as long-lived as the settings): validating a new one
#: every request was ~10 us of pydantic.
_RULES: ObjectMemo[RulesPolicy] = ObjectMemo(limit=64)


def _tail(ctx: Context) -> list[Finding]:
    found: list[Finding] = []
    if ctx.reminder:
        found.append(("dynamic_tail_last", f"{len(ctx.reminder)} reminder line(s) were never rendered", ""))
    reminders = _reminder_index(ctx.messages)
    if any(i != len(ctx.messages) - 1 for i in reminders):
        found.append(("dynamic_tail_last", "a <reminder> block is not the last message", ""))
    prefix = "\n".join(text_of(m.get("content")) for m in system_messages(ctx.messages))
    if PLACEHOLDER_RX.search(prefix) and not reminders:
        found.append(("dynamic_tail_last", "the prefix refers to the reminder but there is none", ""))
    return found


def _flat(texts: Iterable[str]) -> str:
    """Texts joined with runs of whitespace folded, so a rule wrapped over lines is still found."""
    return " ".join(" ".join(texts).split())


def _rules(ctx: Context, policy: LintPolicy) -> list[Finding]:
    rules = find_rules(ctx.messages, _RULES.get_or(policy, lambda p: RulesPolicy(rules=p.rules)))
    if not rules:
        return []
    messages = ctx.messages
    start = _flat(text_of(m.get("content")) for m in system_messages(messages) if not is_gateway_block(m))
    reminders = _reminder_index(messages)
    end = _flat([text_of(messages[-1].get("content"))]) if reminders and reminders[-1] == len(messages) - 1 else ""
    middle: str | None = None  # the whole history folded: built only if a rule is missing at the start
    omitted = set(ctx.annotations.get("critical_rules", ())) - set(ctx.annotations.get("restated_rules", ()))
    found: list[Finding] = []
    for rule in rules:
        flat = _flat([rule.text])
        short = rule.text if len(rule.text) <= 60 else rule.text[:57] + "..."
        if flat not in start:
            if middle is None:
                middle = _flat(text_of(m.get("content")) for m in messages if not is_system(m))
            where = "only in the middle" if flat in middle else "not at the start"
            found.append(("critical_rules_at_edges", f"critical rule {short!r} is {where}", ""))
        if flat not in end:
            severity = "warning" if rule.text in omitted else ""
            found.append(("critical_rules_at_edges", f"critical rule {short!r} is not restated at the end", severity))
    return found


def _compaction(ctx: Context, policy: LintPolicy) -> list[Finding]:
    found: list[Finding] = []
    if policy.compaction_threshold is None:
        found.append(("compaction_threshold", "no compaction threshold is configured (enable compact_history)", ""))
    messages = ctx.messages
    summaries = _summary_index(messages)
    if not summaries:
        return found
    users = client_user_indices(messages)
    leading = next((i for i, m in enumerate(messages) if not is_system(m)), len(messages))
    for i in summaries:  # the last user turn is the safety check's (``verify_assembly``, against the original):
        # a summary after it is an agent loop's older rounds, flagged as an error on every compacted loop turn
        if i < leading or (users and i < users[0]):
            found.append(("compaction_edges", f"the summary at message {i} replaces an edge of the context", ""))
    return found


def lint_context(ctx: Context, policy: LintPolicy) -> tuple[Context, list[Decision]]:
    """Check the final layout against the gate; each finding is a ``finding`` Decision."""
    findings = _prefix_values(ctx, policy) + _tail(ctx) + _rules(ctx, policy) + _compaction(ctx, policy)
    decisions: list[Decision] = []
    for check, message, override in findings:
        severity = policy.severity(check)
        if severity == "off":
            continue
        if override == "warning" and severity == "error":
            severity = "warning"
        decisions.append(
            Decision("lint_context", "finding", reason=message, detail={"check": check, "severity": severity})
        )
    return ctx, decisions


def violations(decisions: list[Decision] | tuple[Decision, ...]) -> list[Decision]:
    """The findings that make strict mode reject a request."""
    return [d for d in decisions if d.pass_name == "lint_context" and d.detail.get("severity") == "error"]
