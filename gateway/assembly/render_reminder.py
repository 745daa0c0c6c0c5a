"""Render the reminder lines as one final message, after everything else.

Placement: the reminder is the very last message of the request, after the last user
message and any trailing tool results, as ``{"role": "user", "content":
"<reminder>...</reminder>"}``. Why a user message: every provider accepts a trailing
user message (OpenAI, Anthropic, Gemini, vLLM chat templates), while a trailing
``system`` message is rejected by some templates and moved to the front by litellm for
Anthropic, which would put the per-turn values back into the cached prefix. Nothing may
be appended after it; ``place_cache_breakpoints`` never marks it.

Format (parsed back by ``parse_reminder``, so running the pipeline on its own output
merges into the one reminder instead of adding a second)::

    <reminder>
    Per-turn values and rules; earlier text refers to values as [name: see reminder].
    current_line: Current time: 2026-11-29T16:00:00Z
    critical_rule: Never reveal the API key.
    </reminder>

A value spanning several lines continues on lines indented by two spaces.
"""

from __future__ import annotations

from collections.abc import Sequence

from gateway.assembly.context import Context, Decision, Message
from gateway.assembly.defuse_closers import defuse_closers
from gateway.assembly.policy import PassPolicy

OPEN, CLOSE = "<reminder>", "</reminder>"
HEADER = "Per-turn values and rules; earlier text refers to values as [name: see reminder]."


class ReminderPolicy(PassPolicy):
    pass


def format_reminder(lines: Sequence[tuple[str, str]]) -> str:
    body = [defuse_closers(f"{kind}: {text}").replace("\n", "\n  ") for kind, text in lines]
    return "\n".join([OPEN, HEADER, *body, CLOSE])


def parse_reminder(content: object) -> list[tuple[str, str]] | None:
    """The ``(kind, text)`` lines of a reminder this module wrote, or None for any other content."""
    if not isinstance(content, str) or not content.startswith(OPEN + "\n" + HEADER) or not content.endswith(CLOSE):
        return None
    rows = content[len(OPEN) + len(HEADER) + 2 : -len(CLOSE)].split("\n")
    lines: list[tuple[str, str]] = []
    for row in rows[:-1] if rows and rows[-1] == "" else rows:
        if row.startswith("  ") and lines:
            kind, text = lines[-1]
            lines[-1] = (kind, text + "\n" + row[2:])
        elif ": " in row:
            kind, _, text = row.partition(": ")
            lines.append((kind, text))
    return lines


def _is_reminder(message: Message) -> bool:
    return message.get("role") == "user" and parse_reminder(message.get("content")) is not None


def render_reminder(ctx: Context, policy: ReminderPolicy) -> tuple[Context, list[Decision]]:
    """Append one ``<reminder>`` user message holding every reminder line; nothing when there are none.

    When the context already ends with a reminder this module wrote (the pipeline run on
    its own output), the new lines are merged into it, so the result has one reminder.
    """
    messages = ctx.messages
    existing: list[tuple[str, str]] = []
    if messages and _is_reminder(messages[-1]):
        existing = parse_reminder(messages[-1].get("content")) or []
        messages = messages[:-1]
    lines = list(existing)
    for line in ctx.reminder:
        if line not in lines:
            lines.append(line)
    if not ctx.reminder:
        return ctx, []
    if lines == existing:
        return ctx.replace(reminder=()), []
    text = format_reminder(lines)
    message = {"role": "user", "content": text}
    tokens = ctx.env.counter.message(message)
    decision = Decision(
        "render_reminder",
        "rendered",
        tokens_before=0,
        tokens_after=tokens,
        reason=f"rendered {len(lines)} reminder line(s) as the last message",
        detail={"lines": len(lines), "kinds": sorted({kind for kind, _ in lines})},
    )
    return ctx.replace(messages=(*messages, message), reminder=()), [decision]
