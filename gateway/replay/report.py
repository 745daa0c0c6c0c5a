"""Show what-if results: a terminal table, CSV or JSON, and a PNG chart of tokens per component."""

from __future__ import annotations

import csv
import io
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

import orjson
from rich.console import Console
from rich.table import Table

from gateway.assembly.budget_report import COMPONENTS
from gateway.replay.whatif import WhatIfResult

_TURN_COLUMNS = (
    "turn",
    "tokens_original",
    "tokens_sent",
    "cached_read",
    "cache_write",
    "compactions",
    "tool_set_changes",
    "lint_findings",
)


def turn_rows(result: WhatIfResult) -> list[dict[str, Any]]:
    rows = []
    for t in result.turns:
        row = asdict(t)
        components = row.pop("components")
        saved = row.pop("saved_by_pass")
        row.update({f"tokens:{k}": v for k, v in components.items()})
        row.update({f"saved:{k}": v for k, v in saved.items()})
        row["policy"] = result.policy_name
        rows.append(row)
    return rows


def to_csv(results: Sequence[WhatIfResult]) -> str:
    rows = [row for r in results for row in turn_rows(r)]
    fields: list[str] = []
    for row in rows:
        fields += [k for k in row if k not in fields]
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=fields, restval=0)
    writer.writeheader()
    writer.writerows(rows)
    return out.getvalue()


def to_json(results: Sequence[WhatIfResult]) -> bytes:
    payload = [
        {"policy": r.policy_name, "cache_model": r.cache_kind, "totals": r.totals(), "turns": turn_rows(r)}
        for r in results
    ]
    return orjson.dumps(payload, option=orjson.OPT_INDENT_2)


def print_report(results: Sequence[WhatIfResult], console: Console, *, per_turn: bool = True) -> None:
    if per_turn:
        table = Table(title="What-if, per turn")
        labels = [f"{t.conversation}/{t.turn}" for t in results[0].turns] if results else []
        # never cut: a conversation id cut to "tau-ai..." names no conversation
        table.add_column("conv/turn", no_wrap=True, min_width=max(map(len, labels), default=9))
        for r in results:
            for col in ("sent", "cached", "written", "compact", "tools±"):
                table.add_column(f"{r.policy_name}\n{col}", justify="right")
        for rows in zip(*(r.turns for r in results), strict=True):
            cells = [f"{rows[0].conversation}/{rows[0].turn}"]
            for t in rows:
                cells += [
                    f"{t.tokens_sent:,}",
                    f"{t.cached_read:,}",
                    f"{t.cache_write:,}",
                    str(t.compactions or ""),
                    str(t.tool_set_changes or ""),
                ]
            table.add_row(*cells)
        console.print(table)
    totals = Table(title="What-if, totals")
    totals.add_column("measure")
    for r in results:
        totals.add_column(r.policy_name, justify="right")
    keys: list[str] = []
    for r in results:
        keys += [k for k in r.totals() if k not in keys]
    for key in keys:
        totals.add_row(key, *[_fmt(r.totals().get(key, 0)) for r in results])
    console.print(totals)


def _fmt(value: float) -> str:
    if isinstance(value, float) and not value.is_integer():
        return f"{value:,.4f}"
    return f"{int(value):,}"


def write_chart(results: Sequence[WhatIfResult], path: str | Path) -> Path:
    """Stacked bars of tokens per component per turn, one panel per policy, compactions marked."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(len(results), 1, figsize=(12, 3.6 * len(results)), squeeze=False, sharex=True)
    colors = plt.get_cmap("tab10")
    for ax, result in zip(axes[:, 0], results, strict=True):
        xs = list(range(1, len(result.turns) + 1))
        bottom = [0] * len(xs)
        for i, name in enumerate(c for c in COMPONENTS if c != "reserve"):
            values = [t.components.get(name, 0) for t in result.turns]
            if any(values):
                ax.bar(xs, values, bottom=bottom, label=name, color=colors(i), width=0.9)
                bottom = [b + v for b, v in zip(bottom, values, strict=True)]
        ax.plot(xs, [t.cached_read for t in result.turns], color="black", lw=1.2, label="cached (read)")
        for x, t in zip(xs, result.turns, strict=True):
            if t.compactions:
                ax.axvline(x, color="red", ls="--", lw=0.8)
        ax.set_title(f"{result.policy_name}: tokens per component per turn (red dashes: compaction)")
        ax.set_ylabel("tokens")
        ax.legend(loc="upper left", fontsize=7, ncol=5)
    axes[-1, 0].set_xlabel("request (turn, across conversations)")
    fig.tight_layout()
    out = Path(path)
    fig.savefig(out, dpi=110)
    plt.close(fig)
    return out
