"""``ventana inspect``: what the model saw, zone by zone, and why.

The assembled context is shown in the four zones the design is built around:
the static prefix (system/developer messages and the tools, which must stay
byte-identical for the provider's cache), the compacted summary (messages the gateway
wrote, starting ``<summary``), the recent history, and the dynamic tail (everything
after the client's last user message, including the ``<reminder>``). Then the decisions, the
budget report and the usage. ``--diff`` shows the original against the assembled as a
unified diff of a readable rendering.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping, Sequence
from typing import Any

import orjson
from rich.console import Console, Group
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from gateway.cli_output import plain, printable
from gateway.store.logs_table import format_time
from gateway.store.queries import StoredRequest
from gateway.tokens import content_text

ZONES = ("static prefix", "compacted summary", "recent history", "dynamic tail")
PREVIEW_CHARS = 400


def zones(messages: Sequence[Mapping[str, Any]]) -> dict[str, list[tuple[int, Mapping[str, Any]]]]:
    """Split messages (with their index) into the four zones, in order.

    >>> z = zones([{"role": "system", "content": "s"}, {"role": "user", "content": "<summary>x</summary>"},
    ...            {"role": "user", "content": "q"}, {"role": "user", "content": "<reminder>r</reminder>"}])
    >>> {k: [i for i, _ in v] for k, v in z.items()}
    {'static prefix': [0], 'compacted summary': [1], 'recent history': [2], 'dynamic tail': [3]}
    """
    out: dict[str, list[tuple[int, Mapping[str, Any]]]] = {zone: [] for zone in ZONES}
    prefix_end = 0
    while prefix_end < len(messages) and messages[prefix_end].get("role") in ("system", "developer"):
        prefix_end += 1
    user_turns = [i for i, m in enumerate(messages) if m.get("role") == "user" and not _is_gateway_text(m)]
    tail_start = user_turns[-1] + 1 if user_turns else len(messages)
    for i, message in enumerate(messages):
        if i < prefix_end:
            zone = "static prefix"
        elif i >= tail_start:
            zone = "dynamic tail"
        elif content_text(message.get("content"))[0].lstrip().startswith("<summary"):
            zone = "compacted summary"
        else:
            zone = "recent history"
        out[zone].append((i, message))
    return out


def _is_gateway_text(message: Mapping[str, Any]) -> bool:
    return content_text(message.get("content"))[0].lstrip().startswith(("<reminder>", "<summary"))


def render_message(message: Mapping[str, Any], *, limit: int | None = None) -> str:
    """A readable rendering of one message: role, text, tool calls."""
    text = content_text(message.get("content"))[0]
    if limit is not None and len(text) > limit:
        text = text[:limit] + f" ... [{len(text) - limit} more chars]"
    head = str(message.get("role", "?"))
    if message.get("tool_call_id"):
        head += f" (result of {message['tool_call_id']})"
    lines = [f"[{head}] {text}"]
    for call in message.get("tool_calls") or ():
        fn = call.get("function") or {}
        lines.append(f"  -> {fn.get('name')}({fn.get('arguments', '')})  id={call.get('id')}")
    return "\n".join(lines)


def render_body(body: Mapping[str, Any]) -> list[str]:
    """The lines ``--diff`` compares: tools by name, then every message in full."""
    lines = [f"tools: {', '.join(_tool_names(body.get('tools')))}"] if body.get("tools") is not None else []
    for i, message in enumerate(body.get("messages") or ()):
        lines.extend(f"{i:>3} {line}" for line in render_message(message).splitlines())
    return lines


def diff_lines(stored: StoredRequest) -> list[str]:
    return list(
        difflib.unified_diff(
            render_body(stored.original), render_body(stored.assembled), "original", "assembled", lineterm=""
        )
    )


def _tool_names(tools: Any) -> list[str]:
    return [str((t.get("function") or {}).get("name", "?")) for t in tools or () if isinstance(t, Mapping)]


def print_inspect(stored: StoredRequest, console: Console, *, diff: bool = False) -> None:
    s = stored.summary
    head = Text.assemble(
        (printable(s.request_id), "bold"),
        printable(f"  session {s.session_id}  turn {s.turn}  {format_time(s.created_at)} UTC\n"),
        printable(f"model {s.model} ({s.provider})  status {s.status}  stream {s.stream}"),
        printable(f"  replay of {s.replay_of}" if s.replay_of else ""),
        (printable(f"\nerror: {s.error}"), "red") if s.error else "",
    )
    console.print(head)  # every value here is data a client or a provider wrote: Text, not markup
    if diff:
        lines = diff_lines(stored)
        console.print(Text("\n".join(lines)) if lines else "original and assembled are identical")
        return
    _print_zones(stored.assembled, console)
    console.print(_decisions_table(stored.decisions))
    console.print(Panel(_json(stored.budget) if stored.budget else "no budget report recorded", title="budget"))
    console.print(_usage_table(stored))
    answer = stored.response_text or ""
    calls = ", ".join(_call_names(stored.tool_calls)) or "none"
    console.print(Panel(plain(f"{answer}\n\ntool calls: {calls}  finish: {stored.finish_reason}"), title="response"))


def _print_zones(body: Mapping[str, Any], console: Console) -> None:
    split = zones(body.get("messages") or ())
    tools = body.get("tools")
    for zone in ZONES:
        parts = [Text(printable(render_message(m, limit=PREVIEW_CHARS)), overflow="fold") for _, m in split[zone]]
        if zone == "static prefix" and tools is not None:
            parts.append(Text(f"tools ({len(tools)}): {', '.join(_tool_names(tools))}"))
        if not parts:
            parts = [Text("(empty)", style="dim")]
        console.print(Panel(Group(*parts), title=f"{zone} ({len(split[zone])} messages)", title_align="left"))


def _decisions_table(decisions: Sequence[Mapping[str, Any]]) -> Table:
    table = Table(title=f"decisions ({len(decisions)})", title_justify="left")
    for column in ("pass", "action", "tokens before -> after", "reason"):
        table.add_column(column)
    for d in decisions:
        table.add_row(
            plain(d.get("pass")),
            plain(d.get("action")),
            f"{d.get('tokens_before', 0)} -> {d.get('tokens_after', 0)}",
            plain(d.get("reason", "")),
        )
    return table


def _usage_table(stored: StoredRequest) -> Table:
    s = stored.summary
    table = Table(title="usage and latency", title_justify="left")
    rows = [
        ("prompt tokens (original -> assembled)", f"{s.tokens_original} -> {s.tokens_assembled}"),
        ("prompt tokens billed", str(s.prompt_tokens)),
        ("cached tokens", str(s.cached_tokens)),
        ("cache write tokens", str(s.cache_write_tokens)),
        ("completion tokens", str(s.completion_tokens)),
        ("gateway overhead ms", f"{s.overhead_ms:.2f}"),
        ("upstream ttfb ms", "-" if s.ttfb_ms is None else f"{s.ttfb_ms:.2f}"),
        ("total ms", f"{s.total_ms:.2f}"),
    ]
    table.add_column("what")
    table.add_column("value", justify="right")
    for what, value in rows:
        table.add_row(what, value)
    return table


def _call_names(calls: Sequence[Mapping[str, Any]] | None) -> list[str]:
    return [str((c.get("function") or {}).get("name")) for c in calls or ()]


def _json(value: Any) -> str:
    return orjson.dumps(value, option=orjson.OPT_INDENT_2).decode()
