"""``ventana logs``: the recorded requests as a table (or JSON), newest first."""

from __future__ import annotations

import re
import time
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime

from rich.console import Console
from rich.table import Table
from rich.text import Text

from gateway.cli_output import plain, printable
from gateway.store.queries import RequestSummary

_RELATIVE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([smhdw])\s*$")
_UNIT_S = {"s": 1, "m": 60, "h": 3600, "d": 86_400, "w": 604_800}


def parse_since(value: str, *, now: float | None = None) -> float:
    """Unix seconds for ``--since``: a duration back from now (``30m``, ``2h``, ``7d``) or an ISO time.

    >>> parse_since("2h", now=10_000.0)
    2800.0
    >>> parse_since("1970-01-01T01:00:00Z")
    3600.0
    """
    match = _RELATIVE.match(value)
    if match:
        return (time.time() if now is None else now) - float(match.group(1)) * _UNIT_S[match.group(2)]
    try:
        moment = datetime.fromisoformat(value.strip().replace("Z", "+00:00"))
    except ValueError as exc:
        raise ValueError(
            f"--since expects a duration like 30m, 2h, 7d or an ISO time like 2026-11-29T10:00, found {value!r}"
        ) from exc
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.timestamp()


def format_time(ts: float) -> str:
    return datetime.fromtimestamp(ts, UTC).strftime("%Y-%m-%d %H:%M:%S")


ERROR_CHARS = 80


def logs_table(rows: Sequence[RequestSummary], names: Mapping[str, str] | None = None) -> Table:
    """One line per request: time, door, session, turn, model, tokens original -> forwarded, billed, status, flags."""
    table = Table(title=f"{len(rows)} requests (newest first)", title_justify="left")
    table.add_column("time (UTC)", no_wrap=True)
    table.add_column("request", no_wrap=True)
    table.add_column("door", no_wrap=True)
    table.add_column("caller", no_wrap=True)
    table.add_column("session", no_wrap=True)
    table.add_column("turn", justify="right", no_wrap=True)
    table.add_column("model")
    table.add_column("tokens orig -> sent", justify="right", no_wrap=True)
    table.add_column("billed prompt", justify="right")
    table.add_column("cached", justify="right")
    table.add_column("status", justify="right")
    table.add_column("ms", justify="right")
    table.add_column("notes / error", overflow="fold")
    for row in rows:
        status = str(row.status) if row.status < 400 else f"[red]{row.status}[/red]"
        notes = row_flags(row)
        table.add_row(
            format_time(row.created_at),
            plain(row.request_id),
            plain(row.route),
            plain((names or {}).get(row.caller, row.caller)),  # the key's configured name, else its hash
            plain(row.session_id),  # a client-chosen name: never markup, never terminal escapes
            str(row.turn),
            plain(row.model),
            "-" if row.refused else f"{row.tokens_original} -> {row.tokens_assembled}",
            str(row.prompt_tokens),
            str(row.cached_tokens),
            status,
            f"{row.total_ms:.0f}",
            Text(printable(" · ".join([*notes, *([_short(row.error)] if row.error else [])])), style="red")
            if row.error
            else ", ".join(notes),
        )
    return table


def row_flags(row: RequestSummary) -> list[str]:
    """What a reader must know about a row before its numbers: refused, reverted, several calls."""
    out = []
    if row.refused:
        out.append("refused")
    if row.reverted:
        out.append("reverted")
    if row.upstream_calls > 1:
        out.append(f"{row.upstream_calls} upstream calls")
    return out


def totals_line(rows: Sequence[RequestSummary]) -> str:
    """The billed usage of the listed requests, summed (what the provider charged for them)."""
    prompt = sum(r.prompt_tokens for r in rows)
    cached = sum(r.cached_tokens for r in rows)
    completion = sum(r.completion_tokens for r in rows)
    return (
        f"billed over {len(rows)} requests: prompt {prompt:,} (cached {cached:,}), completion {completion:,}; "
        f"forwarded {sum(r.tokens_assembled for r in rows):,} of {sum(r.tokens_original for r in rows):,} sent"
    )


def _short(error: str) -> str:
    line = " ".join(error.split())
    return line if len(line) <= ERROR_CHARS else line[: ERROR_CHARS - 3] + "..."


def print_logs(rows: Sequence[RequestSummary], console: Console, names: Mapping[str, str] | None = None) -> None:
    if not rows:
        console.print("no requests recorded (yet)")
        return
    console.print(logs_table(rows, names))
    console.print(totals_line(rows), highlight=False)
