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
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import orjson
from rich.console import Console, Group
from rich.panel import Panel
from rich.table import Table
from rich.text import Text
from sqlalchemy import Engine, select

from gateway.cli_output import plain, printable
from gateway.store.compaction_lines import compaction_lines
from gateway.store.figures import Figures, of_summary
from gateway.store.logs_table import format_time
from gateway.store.models import Request
from gateway.store.queries import StoredRequest
from gateway.tokens import content_text

ZONES = ("static prefix", "compacted summary", "recalled", "recent history", "dynamic tail")
PREVIEW_CHARS = 400


def zone_of(i: int, message: Mapping[str, Any], prefix_end: int, tail_start: int) -> str:
    """The zone of message ``i``: the leading system messages, a summary (wherever it was placed),
    recalled passages, the dynamic tail (the newest client message, the query, and what follows it:
    the reminder), and the recent history between them."""
    text = content_text(message.get("content"))[0].lstrip()
    if i < prefix_end:
        return "static prefix"
    if text.startswith("<summary"):
        return "compacted summary"
    if text.startswith(("<recalled", "<memory")):
        return "recalled"
    if i >= tail_start:
        return "dynamic tail"
    return "recent history"


def zone_runs(messages: Sequence[Mapping[str, Any]]) -> list[tuple[str, list[tuple[int, Mapping[str, Any]]]]]:
    """The messages as runs of one zone each, in the order they were sent (a summary placed after the
    task is drawn after it; the model read it there).

    >>> runs = zone_runs([{"role": "system", "content": "s"}, {"role": "user", "content": "task"},
    ...                   {"role": "user", "content": "<summary>x</summary>"}, {"role": "assistant", "content": "a"},
    ...                   {"role": "tool", "tool_call_id": "1", "content": "r"},
    ...                   {"role": "user", "content": "<reminder>r</reminder>"}])
    >>> [(zone[:7], [i for i, _ in items]) for zone, items in runs]
    [('static ', [0]), ('recent ', [1]), ('compact', [2]), ('recent ', [3]), ('dynamic', [4, 5])]
    """
    prefix_end = 0
    while prefix_end < len(messages) and messages[prefix_end].get("role") in ("system", "developer"):
        prefix_end += 1
    client = [i for i, m in enumerate(messages) if m.get("role") in ("user", "tool") and not _is_gateway_text(m)]
    tail_start = client[-1] if client else len(messages)  # the query: the newest client message
    runs: list[tuple[str, list[tuple[int, Mapping[str, Any]]]]] = []
    for i, message in enumerate(messages):
        zone = zone_of(i, message, prefix_end, tail_start)
        if runs and runs[-1][0] == zone:
            runs[-1][1].append((i, message))
        else:
            runs.append((zone, [(i, message)]))
    return runs


def zones(messages: Sequence[Mapping[str, Any]]) -> dict[str, list[tuple[int, Mapping[str, Any]]]]:
    """Messages (with their index) by zone.

    >>> z = zones([{"role": "system", "content": "s"}, {"role": "user", "content": "<summary>x</summary>"},
    ...            {"role": "user", "content": "q"}, {"role": "user", "content": "<reminder>r</reminder>"}])
    >>> {k: [i for i, _ in v] for k, v in z.items()}
    {'static prefix': [0], 'compacted summary': [1], 'recalled': [], 'recent history': [], 'dynamic tail': [2, 3]}
    """
    out: dict[str, list[tuple[int, Mapping[str, Any]]]] = {zone: [] for zone in ZONES}
    for zone, items in zone_runs(messages):
        out[zone].extend(items)
    return out


def _is_gateway_text(message: Mapping[str, Any]) -> bool:
    return (
        content_text(message.get("content"))[0]
        .lstrip()
        .startswith(("<reminder>", "<summary", "<recalled", "<memory", "<documents"))
    )


def _images(content: Any) -> list[str]:
    """One line per image part: its URL, or for inline data its type and size (never the bytes)."""
    out = []
    for part in content if isinstance(content, list) else ():
        if not isinstance(part, Mapping) or part.get("type") not in ("image_url", "input_image", "image"):
            continue
        ref = part.get("image_url") or part.get("url") or part.get("source") or ""
        url = str((ref.get("url") or ref.get("data") or "") if isinstance(ref, Mapping) else ref)
        if url.startswith("data:"):
            out.append(f"[image: {url[5:].split(';', 1)[0] or 'inline'}, {len(url):,} chars inline]")
        else:
            out.append(f"[image: {url[:200] or '?'}]")
    return out


def render_message(message: Mapping[str, Any], *, limit: int | None = None) -> str:
    """A readable rendering of one message: role, text, images, tool calls."""
    text = content_text(message.get("content"))[0]
    if limit is not None and len(text) > limit:
        text = text[:limit] + f" ... [{len(text) - limit} more chars]"
    text = " ".join([text, *_images(message.get("content"))]).strip()
    head = str(message.get("role", "?"))
    if message.get("tool_call_id"):
        head += f" (result of {message['tool_call_id']})"
    lines = [f"[{head}] {text}"]
    for call in message.get("tool_calls") or ():
        fn = call.get("function") or {}
        lines.append(f"  -> {fn.get('name')}({fn.get('arguments', '')})  id={call.get('id')}")
    return "\n".join(lines)


def render_body(body: Mapping[str, Any]) -> list[str]:
    """The lines ``--diff`` compares: every message in full (tools are compared as a set)."""
    lines: list[str] = []
    for i, message in enumerate(body.get("messages") or ()):
        lines.extend(f"{i:>3} {line}" for line in render_message(message).splitlines())
    return lines


def tool_difference(stored: StoredRequest) -> list[str]:
    """The tools as a set difference: removed ones ``-``, added ones ``+``, a count of the kept.

    A pruned list is a subset, not an edit: a line diff of names would show reorders as changes.
    """
    original, sent = _tool_names(stored.original.get("tools")), _tool_names(stored.assembled.get("tools"))
    if not original and not sent:
        return []
    kept = [n for n in original if n in set(sent)]
    lines = [f"tools: {len(original)} offered, {len(sent)} sent, {len(kept)} kept"]
    steps = of_summary(stored.summary, stored.decisions, stored.budget).steps
    if len(steps) > 1:
        served = [st.called for st in steps if st.called]
        lines[0] += (
            f" (on the last of {len(steps)} upstream calls: the model called {', '.join(dict.fromkeys(served))} "
            f"{len(served)} time(s), answered by the gateway)"
        )
    lines += [f"-tool {n}" for n in original if n not in set(sent)]
    lines += [f"+tool {n}" for n in sent if n not in set(original)]
    return lines


@dataclass(frozen=True, slots=True)
class DiffEntry:
    """One line of the diff by message identity, and the messages it stands for (full text one click away)."""

    kind: str  # kept, added, removed, replaced, summarised, cleared
    text: str
    removed: tuple[tuple[int, Mapping[str, Any]], ...] = ()
    added: tuple[tuple[int, Mapping[str, Any]], ...] = ()


def _identity(message: Mapping[str, Any]) -> bytes:
    return orjson.dumps(message, option=orjson.OPT_SORT_KEYS, default=str)


def _span(i: int, j: int) -> str:
    return f"#{i}" if j - i == 1 else f"#{i}-{j - 1}"


def _signed(sign: str, i: int, message: Mapping[str, Any], limit: int | None) -> list[str]:
    return [f"{sign}{i:>3} {line}" for line in render_message(message, limit=limit).splitlines()]


def identity_diff(
    original: Sequence[Mapping[str, Any]], assembled: Sequence[Mapping[str, Any]], *, limit: int | None = None
) -> list[DiffEntry]:
    """Original against assembled by message identity: a message forwarded unchanged is kept
    wherever it moved (a summary shifts every index after it), a range the gateway replaced is one
    line naming what replaced it, and runs of unchanged messages and of cleared tool results are
    folded to one line each. ``limit`` cuts each rendered message's text (the page links the full text).
    """
    a = [_identity(m) for m in original]
    b = [_identity(m) for m in assembled]
    entries: list[DiffEntry] = []
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes():
        gone = tuple((i, original[i]) for i in range(i1, i2))
        new = tuple((j, assembled[j]) for j in range(j1, j2))
        if tag == "equal":
            moved = f", now #{j1}" + (f"-{j2 - 1}" if j2 - j1 > 1 else "") if i1 != j1 else ""
            entries.append(DiffEntry("kept", f"= {_span(i1, i2)} kept as sent ({i2 - i1} messages{moved})"))
        elif tag == "insert":
            entries += [DiffEntry("added", line, added=((j, m),)) for j, m in new for line in _signed("+", j, m, limit)]
        elif tag == "delete":
            entries.append(DiffEntry("removed", f"- {_span(i1, i2)} removed ({i2 - i1} messages)", removed=gone))
        elif _all_tool_results(gone, new):
            for (i, _), (j, n) in zip(gone, new, strict=True):
                text = f"~ #{i} tool result cleared: {render_message(n, limit=120)}"
                entries.append(DiffEntry("cleared", text, removed=((i, original[i]),), added=((j, n),)))
        elif tag == "replace" and _edited_in_place(gone, new):  # one message edited (a value moved out)
            (i, m), (j, n) = gone[0], new[0]
            entries += [DiffEntry("replaced", x, removed=((i, m),)) for x in _signed("-", i, m, limit)]
            entries += [DiffEntry("replaced", x, added=((j, n),)) for x in _signed("+", j, n, limit)]
            rest = identity_diff(original[i1 + 1 : i2], assembled[j1 + 1 : j2], limit=limit)
            entries += [_shifted(e, i1 + 1, j1 + 1) for e in rest]
        elif any(_is_gateway_text(m) for _, m in new) and len(gone) > 1:
            entries.append(
                DiffEntry("summarised", f"- {_span(i1, i2)} summarised ({i2 - i1} messages) into:", removed=gone)
            )
            entries += [DiffEntry("added", line, added=((j, m),)) for j, m in new for line in _signed("+", j, m, limit)]
        else:
            entries += [
                DiffEntry("removed", ln, removed=((i, m),)) for i, m in gone for ln in _signed("-", i, m, limit)
            ]
            entries += [DiffEntry("added", ln, added=((j, m),)) for j, m in new for ln in _signed("+", j, m, limit)]
    return _fold_clearing(entries)


def _edited_in_place(
    gone: Sequence[tuple[int, Mapping[str, Any]]], new: Sequence[tuple[int, Mapping[str, Any]]]
) -> bool:
    """The first message of a replaced range is the client's, edited (same role, not a gateway block),
    and more follows: it is diffed on its own, the rest of the range after it."""
    if len(gone) + len(new) <= 2:
        return len(gone) == len(new) == 1 and gone[0][1].get("role") == new[0][1].get("role")
    first, second = gone[0][1], new[0][1]
    return first.get("role") == second.get("role") and not _is_gateway_text(second) and not _is_gateway_text(first)


def _shifted(entry: DiffEntry, di: int, dj: int) -> DiffEntry:
    """An entry of a sub-range's diff with its positions in the whole lists."""

    def renumber(text: str) -> str:
        if text[:1] in "+-" and text[1:4].strip().isdigit():
            base = dj if text[0] == "+" else di
            return f"{text[0]}{int(text[1:4]) + base:>3}{text[4:]}"
        text = re.sub(r"now #(\d+)(?:-(\d+))?", lambda m: _moved(m, dj), text)
        return re.sub(r"#(\d+)(?:-(\d+))?", lambda m: _moved(m, di, ""), text, count=1)

    return DiffEntry(
        entry.kind,
        renumber(entry.text),
        tuple((i + di, m) for i, m in entry.removed),
        tuple((j + dj, m) for j, m in entry.added),
    )


def _moved(match: re.Match[str], by: int, prefix: str = "now ") -> str:
    start, end = match.group(1), match.group(2)
    return f"{prefix}#{int(start) + by}" + (f"-{int(end) + by}" if end else "")


def _all_tool_results(
    gone: Sequence[tuple[int, Mapping[str, Any]]], new: Sequence[tuple[int, Mapping[str, Any]]]
) -> bool:
    """Each of ``gone`` is a tool result replaced, one for one, by a tool result (a cleared stub)."""
    if len(gone) != len(new):
        return False
    return all(m.get("role") == "tool" == n.get("role") for (_, m), (_, n) in zip(gone, new, strict=True))


def _fold_clearing(entries: list[DiffEntry]) -> list[DiffEntry]:
    """Runs of cleared tool results (with the kept calls between them) become one line."""
    out: list[DiffEntry] = []
    k = 0
    while k < len(entries):
        end = k  # a run starts at a cleared result
        while entries[k].kind == "cleared" and end < len(entries) and entries[end].kind in ("cleared", "kept"):
            end += 1
        while end > k and entries[end - 1].kind == "kept":
            end -= 1
        run = entries[k:end]
        cleared = [e for e in run if e.kind == "cleared"]
        if len(cleared) >= 2:
            first, last = cleared[0].removed[0][0], cleared[-1].removed[0][0]
            removed = tuple(r for e in cleared for r in e.removed)
            added = tuple(r for e in cleared for r in e.added)
            text = f"~ #{first}-{last}: {len(cleared)} tool results cleared (the calls between them kept)"
            out.append(DiffEntry("cleared", text, removed, added))
            k = end
            continue
        out.append(entries[k])
        k += 1
    return out


def diff_lines(stored: StoredRequest) -> list[str]:
    """The tools' set difference, then the messages' diff by identity, one line per entry."""
    entries = identity_diff(stored.original.get("messages") or (), stored.assembled.get("messages") or ())
    if all(e.kind == "kept" for e in entries):
        entries = []
    return [*tool_difference(stored), *(e.text for e in entries)]


def styled_diff(lines: Sequence[str]) -> Text:
    """The diff coloured the way ``git diff`` is: removed red, added green, hunks cyan."""
    out = Text()
    for line in lines:
        if line.startswith(("+++", "---")):
            style = "bold"
        elif line.startswith("@@"):
            style = "cyan"
        elif line.startswith("+"):
            style = "green"
        elif line.startswith("~"):
            style = "yellow"
        elif line.startswith("-"):
            style = "red"
        else:
            style = ""
        out.append(line + "\n", style=style)
    return out


def ids_starting(engine: Engine, prefix: str, limit: int = 5) -> list[str]:
    """Request ids that start with ``prefix`` (at most ``limit``), to say why a prefix found nothing."""
    query = (
        select(Request.request_id)
        .where(Request.request_id.startswith(prefix, autoescape=True))
        .order_by(Request.request_id)
        .limit(limit)
    )
    with engine.connect() as conn:
        return list(conn.scalars(query))


def not_found_message(engine: Engine, request_id: str, where: str) -> str:
    """``no request`` or, for a prefix several ids share, which ones: the user needs more characters."""
    found = ids_starting(engine, request_id)
    if len(found) > 1:
        more = ", ..." if len(found) == 5 else ""
        return f"{request_id!r} is ambiguous: it starts {', '.join(found)}{more}; give more characters of the id"
    return f"no request {request_id!r} in {where} (see `ventana logs`)"


def _tool_names(tools: Any) -> list[str]:
    return [str((t.get("function") or {}).get("name", "?")) for t in tools or () if isinstance(t, Mapping)]


def print_inspect(stored: StoredRequest, console: Console, *, diff: bool = False) -> None:
    s = stored.summary
    head = Text.assemble(
        (printable(s.request_id), "bold"),
        printable(f"  session {s.session_id}  turn {s.turn}  {format_time(s.created_at)} UTC\n"),
        printable(f"door {s.route}  caller {s.caller}  model {s.model} ({s.provider})  status {s.status}"),
        printable(f"  stream {s.stream}"),
        printable(f"  replay of {s.replay_of}" if s.replay_of else ""),
        (printable(f"\nerror: {s.error}"), "red") if s.error else "",
    )
    console.print(head)  # every value here is data a client or a provider wrote: Text, not markup
    console.print(figures_text(of_summary(s, stored.decisions, stored.budget)))
    if diff:
        lines = diff_lines(stored)
        console.print(styled_diff(lines) if lines else "original and assembled are identical", end="")
        return
    _print_zones(stored.assembled, console)
    compaction = compaction_lines(stored.decisions)
    if compaction:
        console.print(Panel(plain("\n".join(line for _, line in compaction)), title="compaction", title_align="left"))
    console.print(_decisions_table(stored.decisions, of_summary(s, stored.decisions, stored.budget)))
    console.print(_budget_table(stored))
    console.print(_usage_table(stored))
    answer = stored.response_text or ""
    calls = ", ".join(_call_names(stored.tool_calls)) or "none"
    console.print(Panel(plain(f"{answer}\n\ntool calls: {calls}  finish: {stored.finish_reason}"), title="response"))


@dataclass(frozen=True, slots=True)
class BudgetRow:
    component: str
    tokens: int
    share_of_window: float
    suggestion: str


def budget_rows(stored: StoredRequest) -> list[BudgetRow]:
    """The budget report's lines, its suggestions read against what this request already did.

    The report is computed on the assembled request: a history still large after a compaction
    is not a reason to "enable compact_history", which is on; the suggestion says so.
    """
    components = (stored.budget or {}).get("components") or {}
    figures = of_summary(stored.summary, stored.decisions, stored.budget)
    gone = figures.undone
    compacted = any(
        d.get("pass") == "compact_history" and d.get("action") in ("compacted", "checkpoint_reused") and i not in gone
        for i, d in enumerate(stored.decisions)
    )
    out = []
    for name, line in components.items():
        suggestion = str(line.get("suggestion") or "")
        if figures.reverted is not None and suggestion:
            suggestion = f"the plan was reverted, so this is the client's request as sent: {suggestion}"
        elif name == "history" and compacted and suggestion:
            suggestion = "history is compacted already: lower compaction.threshold or keep_recent_turns"
        out.append(BudgetRow(name, int(line.get("tokens") or 0), float(line.get("share_of_window") or 0), suggestion))
    return out


def _budget_table(stored: StoredRequest) -> Table | str:
    rows = budget_rows(stored)
    if not rows:
        return "no budget report recorded"
    table = Table(title="budget", title_justify="left")
    for column, justify in (("component", "left"), ("tokens", "right"), ("of window", "right"), ("suggestion", "left")):
        table.add_column(column, justify=justify)  # type: ignore[arg-type]
    for b in rows:
        table.add_row(b.component, f"{b.tokens:,}", f"{b.share_of_window:.0%}", b.suggestion)
    return table


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


def figures_text(f: Figures) -> Text:
    """The request's figures and its banners: refused, reverted (with the reason), over the window,
    the saving (negative shown as more sent), and each upstream call of a served-tool loop."""
    out = Text()
    if f.refused:
        out.append("REFUSED before forwarding: nothing was sent upstream\n", style="bold red")
        return out
    if f.reverted is not None:
        out.append(printable(f"REVERTED: what the passes decided did not go out. {f.reverted}") + "\n", "bold red")
    if f.over_window is not None:
        prompt, window = f.over_window
        out.append(f"OVER THE WINDOW: {prompt:,} prompt tokens went out for a {window:,}-token window\n", "bold red")
    style = "" if f.saved >= 0 else "yellow"
    out.append(f"prompt tokens: {f.tokens_original:,} sent by the client -> {f.tokens_forwarded:,} forwarded, ")
    out.append(f.saved_text() + "\n", style)
    for st in f.steps:
        what = f"called {st.called} (answered by the gateway)" if st.called else "answered"
        out.append(
            f"  call {st.call}: {st.prompt_tokens:,} prompt tokens sent, billed {st.billed_prompt:,} prompt "
            f"({st.billed_cached:,} cached) + {st.billed_completion:,} completion; the model {what}\n"
        )
    return out


def _decisions_table(decisions: Sequence[Mapping[str, Any]], f: Figures | None = None) -> Table:
    table = Table(title=f"decisions ({len(decisions)})", title_justify="left")
    for column in ("pass", "action", "tokens before -> after", "reason"):
        table.add_column(column)
    gone = f.undone if f is not None else frozenset()
    for i, d in enumerate(decisions):
        table.add_row(
            plain(d.get("pass")),
            plain(d.get("action")) + (" (undone)" if i in gone else ""),
            f"{d.get('tokens_before', 0)} -> {d.get('tokens_after', 0)}",
            plain(d.get("reason", "")),
        )
    return table


def _usage_table(stored: StoredRequest) -> Table:
    s = stored.summary
    table = Table(title="usage and latency", title_justify="left")
    rows = [
        ("prompt tokens (original -> forwarded, every call)", f"{s.tokens_original} -> {s.tokens_assembled}"),
        ("upstream calls", str(s.upstream_calls)),
        ("prompt tokens billed", str(s.prompt_tokens)),
        ("cached tokens", str(s.cached_tokens)),
        ("cache write tokens", str(s.cache_write_tokens)),
        *(
            [("engine: prompt tokens evaluated / reused", f"{s.evaluated_tokens} / {s.reused_tokens}")]
            if s.evaluated_tokens is not None
            else []
        ),
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
