"""Move per-turn values out of the cacheable prefix into the trailing reminder.

A provider caches a prompt by exact prefix: one timestamp, request id or counter in the
system prompt changes the first bytes of every turn and nothing is ever cached. This
pass finds such values in system/developer messages, replaces each by a placeholder
that does not depend on the value (``[current_line: see reminder]``) and pushes
``(label, value)`` to ``ctx.reminder``, which ``render_reminder`` writes as the last
message. Only the value moves: the text around it, the rest of its line included, stays.

What it never touches: tool definitions (a tool's description is static text the client
wrote once, such as CronCreate's "at 2:30pm"; rewriting it would change the tool the
model is offered), and user or assistant messages.

Values are found two ways:

- patterns: the config's ``patterns`` move from the first turn on (the operator says they are
  per-turn). The built-in per-turn ones (``volatile_patterns.PER_TURN_PATTERNS``: a timestamp
  with a time of day, a request id, an explicit "Current time:" label, a millisecond epoch)
  move once the session showed one of their values change (the pattern's name is remembered
  in ``state.volatile_spans`` and it moves on every later turn): a value identical on every
  turn is cacheable where it is, and moving it would only add an uncached reminder line to
  every turn (tau2's fixed "The current time is 2025-02-25 12:08:00 EST." made a session
  1.8 % costlier than sending it directly). The turn a value first changes misses the cache
  from it on, as the client's own request does. With ``learn`` off they move on sight.
  A bare date, a clock time, a UUID or "Step 1" is as often static text, so on its own
  it is left where it is;
- learning: a span of the system prompt that differs from the same session's previous
  turn (``state.previous_system``), after the patterns were applied to both, is volatile
  even when no pattern knows it; where it overlaps a match of any built-in pattern (the
  minute of a clock time changed), the whole match is the span. It is remembered in
  ``state.volatile_spans`` as the stable text around it (an anchor), so it is moved on
  every later turn too, including turns where its value happens not to change.

Contract: pure; the placeholders depend only on the labels, so the prefix is byte-stable
across turns; idempotent (placeholders are never matched again).
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import lru_cache, partial
from typing import Any

from pydantic import Field, field_validator

from gateway.assembly.context import Context, Decision, SessionState
from gateway.assembly.message_text import map_text, system_indices, system_messages, text_of, with_content
from gateway.assembly.policy import PassPolicy
from gateway.assembly.verify_assembly import is_gateway_block
from gateway.assembly.volatile_patterns import PER_TURN_PATTERNS, compile_named, find_volatile
from gateway.object_memo import ObjectMemo

PLACEHOLDER = "[{label}: see reminder]"
PLACEHOLDER_RX = re.compile(r"\[[\w #]+: see reminder\]")
_ANCHOR_CHARS = 24
_ANCHOR_SEP = "\x1f"
_TOKEN_RX = re.compile(r"\w+|\s+|[^\w\s]")
_NAME_RX = re.compile(r"^[A-Za-z_]\w*$")
#: A ``state.volatile_spans`` entry that names a built-in per-turn pattern seen changing in the session.
_ACTIVE = "\x1e"

Patterns = tuple[tuple[str, re.Pattern[str]], ...]


class VolatilePolicy(PassPolicy):
    """``patterns``: extra ``name: regex`` pairs; ``learn``: learn spans that change between turns."""

    patterns: dict[str, str] = Field(default_factory=dict)
    learn: bool = True
    max_learned: int = 16
    max_learned_chars: int = 200

    @field_validator("patterns")
    @classmethod
    def _valid_patterns(cls, value: dict[str, str]) -> dict[str, str]:
        for name, pattern in value.items():
            if not _NAME_RX.match(name):
                raise ValueError(f"pattern name {name!r} must be an identifier (letters, digits, _)")
            try:
                re.compile(pattern)
            except re.error as exc:
                raise ValueError(f"pattern {name!r} is not a valid regex: {exc}") from exc
        return value


# Process-wide and pure: a regex compile of pattern strings.
@lru_cache(maxsize=32)
def compiled_patterns(extra: tuple[tuple[str, str], ...]) -> Patterns:
    """Every built-in pattern, then the config's ``extra`` (what the lint check and learning look for)."""
    return compile_named(dict(extra))


@lru_cache(maxsize=32)
def per_turn_patterns(extra: tuple[tuple[str, str], ...]) -> Patterns:
    """The patterns moved on sight: the built-in ones that are per-turn whatever the turn, and the config's."""
    return tuple(
        (name, rx) for name, rx in compiled_patterns(extra) if name in PER_TURN_PATTERNS or (name, rx.pattern) in extra
    )


@lru_cache(maxsize=64)
def session_patterns(extra: tuple[tuple[str, str], ...], active: frozenset[str]) -> Patterns:
    """The patterns moved in a session: the config's, and the built-in per-turn ones whose values
    changed in it (``active``). Memoised so a session's set is one object (``pattern_spans`` memo)."""
    return tuple((name, rx) for name, rx in per_turn_patterns(extra) if name not in PER_TURN_PATTERNS or name in active)


def moved_patterns(extra: tuple[tuple[str, str], ...], anchors: Sequence[str]) -> Patterns:
    """The patterns a session with these learned ``anchors`` (``state.volatile_spans``) moves on sight."""
    return session_patterns(extra, _active(anchors))


def _active(anchors: Sequence[str]) -> frozenset[str]:
    return frozenset(a[len(_ACTIVE) :] for a in anchors if a.startswith(_ACTIVE))


#: Every built-in pattern: a learned span is widened to the match it overlaps.
_ALL_BUILTIN = compile_named({})
#: The built-in per-turn patterns alone: what a session watches for a changed value.
_BUILTIN_PER_TURN = per_turn_patterns(())


@dataclass(slots=True)
class _Moves:
    """Collects the values moved in one request and numbers repeated labels (``iso_date #2``)."""

    lines: list[tuple[str, str]] = field(default_factory=list)
    counts: dict[str, int] = field(default_factory=dict)

    def take(self, name: str, value: str) -> str:
        n = self.counts[name] = self.counts.get(name, 0) + 1
        label = name if n == 1 else f"{name} #{n}"
        self.lines.append((label, value))
        return PLACEHOLDER.format(label=label)


Spans = tuple[tuple[int, int, str], ...]
#: One memo per pattern set, found by identity: hashing the set itself (13 compiled regexes,
#: each hashed over its compiled code) cost 1.4 us a lookup, about 60 us of an agent request
#: that looks up its system prompt and every tool description twice.
#: Process-wide and pure: spans are a function of the text and the patterns' strings alone.
_SPAN_MEMOS: ObjectMemo[Callable[[str], Spans]] = ObjectMemo(limit=32)


def pattern_spans(text: str, patterns: Patterns) -> Spans:
    """Pattern matches that do not touch a placeholder already in the text (idempotence).

    Memoised per text: a session resends the same system prompt and tool descriptions
    every turn, so scanning them costs once, not once per turn.
    """
    return _SPAN_MEMOS.get_or(patterns, _spans_memo)(text)


def _spans_memo(patterns: Patterns) -> Callable[[str], Spans]:
    return lru_cache(maxsize=8192)(partial(_pattern_spans, patterns))


def _pattern_spans(patterns: Patterns, text: str) -> Spans:
    guarded = [(m.start(), m.end()) for m in PLACEHOLDER_RX.finditer(text)]
    spans = find_volatile(text, patterns)
    return tuple(s for s in spans if not any(s[0] < g_end and g_start < s[1] for g_start, g_end in guarded))


def _anchor_span(text: str, anchor: str) -> tuple[int, int] | None:
    """Locate a learned span by the stable text before and after it."""
    before, _, after = anchor.partition(_ANCHOR_SEP)
    start = text.find(before) if before else 0
    if start < 0:
        return None
    start += len(before)
    if after:
        end = text.find(after, start)
    else:
        end = text.find("\n", start)
        end = len(text) if end < 0 else end
    if end <= start or PLACEHOLDER_RX.fullmatch(text[start:end]):
        return None
    return start, end


def _substitute(text: str, patterns: Patterns, anchors: Sequence[str], moves: _Moves) -> str:
    """Replace pattern matches, then learned spans, by placeholders; record each value in ``moves``."""
    out: list[str] = []
    last = 0
    for start, end, name in pattern_spans(text, patterns):
        out.append(text[last:start])
        out.append(moves.take(name, text[start:end]))
        last = end
    out.append(text[last:])
    text = "".join(out)
    for anchor in anchors:
        if anchor.startswith(_ACTIVE):
            continue
        span = _anchor_span(text, anchor)
        if span is not None:
            text = text[: span[0]] + moves.take("learned", text[span[0] : span[1]]) + text[span[1] :]
    return text


def _offsets(tokens: list[str]) -> list[int]:
    offsets = [0]
    for tok in tokens:
        offsets.append(offsets[-1] + len(tok))
    return offsets


def _changed_spans(current: str, previous: str, policy: VolatilePolicy) -> list[tuple[int, int]]:
    """Character spans of ``current`` whose words differ from ``previous``; none for a rewritten prompt."""
    cur_tokens, prev_tokens = _TOKEN_RX.findall(current), _TOKEN_RX.findall(previous)
    matcher = difflib.SequenceMatcher(None, prev_tokens, cur_tokens, autojunk=False)
    if matcher.ratio() < 0.5:
        return []  # a rewritten prompt, not a per-turn value
    offsets = _offsets(cur_tokens)
    spans: list[tuple[int, int]] = []
    for tag, _i1, _i2, j1, j2 in matcher.get_opcodes():
        if tag not in ("replace", "insert"):
            continue
        start, end = offsets[j1], offsets[j2]
        value = current[start:end]
        start += len(value) - len(value.lstrip())
        end -= len(value) - len(value.rstrip())
        if end <= start:
            continue
        start, end = _widened(current, start, end)
        if end - start > policy.max_learned_chars or PLACEHOLDER_RX.search(current[start:end]):
            continue
        if spans and start < spans[-1][1]:  # two changes inside one clock time or date: one span
            start = min(start, spans.pop()[0])
        spans.append((start, end))
    return spans


def _widened(text: str, start: int, end: int) -> tuple[int, int]:
    """``start:end`` grown to every built-in pattern match it overlaps: when the minute of
    "10:01" changes, the value is the clock time, not the digits that differed."""
    for m_start, m_end, _name in pattern_spans(text, _ALL_BUILTIN):
        if m_start < end and start < m_end:
            start, end = min(start, m_start), max(end, m_end)
    return start, end


def _learn_one(current: str, previous: str, policy: VolatilePolicy) -> list[str]:
    """Anchors for the spans of ``current`` that differ from ``previous`` (both already substituted).

    An anchor is the stable text right before and after the span. It stops at any other
    changed span or placeholder, whose text differs on later turns, so it is found again.
    """
    spans = _changed_spans(current, previous, policy)
    bounds = sorted([*spans, *((m.start(), m.end()) for m in PLACEHOLDER_RX.finditer(current))])
    anchors: list[str] = []
    for start, end in spans:
        left = max([b_end for _b, b_end in bounds if b_end <= start], default=0)
        right = min([b_start for b_start, _e in bounds if b_start >= end], default=len(current))
        before = current[max(left, start - _ANCHOR_CHARS) : start]
        after = current[end : min(right, end + _ANCHOR_CHARS)]
        if (len(before) < 3 and start > 0) or (not after and end < len(current) and current[end] != "\n"):
            continue  # too little stable text around it to find it again
        anchors.append(before + _ANCHOR_SEP + after)
    return anchors


def _changed_patterns(current: str, previous: str, active: frozenset[str]) -> list[str]:
    """Markers for the built-in per-turn patterns whose values differ between the two texts."""
    out: list[str] = []
    for name in sorted(PER_TURN_PATTERNS - active):
        now = [current[s:e] for s, e, n in pattern_spans(current, _BUILTIN_PER_TURN) if n == name]
        before = [previous[s:e] for s, e, n in pattern_spans(previous, _BUILTIN_PER_TURN) if n == name]
        if now != before:
            out.append(_ACTIVE + name)
    return out


def _learn(
    system: tuple[str, ...], state: SessionState, extra: tuple[tuple[str, str], ...], policy: VolatilePolicy
) -> list[str]:
    known = list(state.volatile_spans)
    learned: list[str] = []
    for current, previous in zip(system, state.previous_system, strict=False):
        if current == previous:
            continue
        learned += [m for m in _changed_patterns(current, previous, _active([*known, *learned])) if m not in learned]
    patterns = session_patterns(extra, _active([*known, *learned]))
    for current, previous in zip(system, state.previous_system, strict=False):
        if current == previous:
            continue
        cur = _substitute(current, patterns, known, _Moves())
        prev = _substitute(previous, patterns, known, _Moves())
        if cur != prev:
            learned += [a for a in _learn_one(cur, prev, policy) if a not in known and a not in learned]
    room = max(0, policy.max_learned - len(known))
    return learned[:room]


def _system_tokens(ctx: Context, messages: Sequence[Mapping[str, Any]]) -> int:
    return ctx.env.counter.messages(system_messages(messages))


def move_volatile(ctx: Context, policy: VolatilePolicy) -> tuple[Context, list[Decision]]:
    """Move per-turn values out of the prefix into the trailing reminder.

    Rewrites system/developer messages only, never tool definitions; the session keeps the
    client's original system texts and the learned anchors.
    """
    state = ctx.session
    system = tuple(text_of(m.get("content")) for m in system_messages(ctx.messages) if not is_gateway_block(m))
    if not system and not state.previous_system:
        return ctx, []  # no system text, now or before: nothing to move, learn or remember
    extra = tuple(sorted(policy.patterns.items()))
    learned = _learn(system, state, extra, policy) if policy.learn and state.previous_system else []
    anchors = (*state.volatile_spans, *learned)
    patterns = moved_patterns(extra, anchors) if policy.learn else per_turn_patterns(extra)
    moves = _Moves()

    def substitute(text: str) -> str:
        return _substitute(text, patterns, anchors, moves)

    rewritten = list(ctx.messages)
    for i in system_indices(ctx.messages):
        m = rewritten[i]
        if not is_gateway_block(m):
            rewritten[i] = with_content(m, map_text(m.get("content"), substitute))
    if not moves.lines and not learned and system == state.previous_system:
        return ctx, []  # nothing moved, learned or changed: the session's state stays as it is
    messages = tuple(rewritten)
    session = replace(state, previous_system=system, volatile_spans=anchors)
    if not moves.lines and session == state:
        return ctx, []
    decisions: list[Decision] = []
    if learned:
        spans = [
            {"name": a[len(_ACTIVE) :], "text": "(each value of the pattern)"}
            if a.startswith(_ACTIVE)
            else {"name": "learned", "text": a.replace(_ANCHOR_SEP, "…")}
            for a in learned
        ]
        decisions.append(
            Decision(
                "move_volatile",
                "learned",
                reason=f"learned {len(learned)} span(s) that changed since the last turn",
                detail={"spans": spans},
            )
        )
    if not moves.lines:
        return ctx.replace(session=session), decisions
    changed_messages = any(a is not b for a, b in zip(messages, ctx.messages, strict=True))
    decisions.append(
        Decision(
            "move_volatile",
            "moved",
            tokens_before=_system_tokens(ctx, ctx.messages),
            tokens_after=_system_tokens(ctx, messages),
            reason=f"moved {len(moves.lines)} per-turn value(s) from the prefix to the reminder",
            detail={
                "spans": [{"name": label, "text": value} for label, value in moves.lines],
                "changes_system": changed_messages,
            },
        )
    )
    new = ctx.replace(messages=messages, session=session, reminder=(*ctx.reminder, *moves.lines))
    return new, decisions
