"""Draw the dashboards as PNG files from a Prometheus, for people without a Grafana at hand.

Each dashboard becomes one image laid out on Grafana's 24-column grid: every panel's
queries are run against Prometheus' HTTP API exactly as the JSON holds them (variables
filled in as Grafana would for "All models") and drawn with matplotlib: time series as
lines, stats as a number, bar gauges as horizontal bars. It is a faithful picture of what
the queries return, not a pixel copy of Grafana.
"""

from __future__ import annotations

import math
import re
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import httpx

from gateway.dashboards.queries import DASHBOARDS_DIR, PanelQuery, dashboard_queries, to_promql

_ROW_INCHES = 0.42
_WIDTH_INCHES = 20.0
_LEGEND = re.compile(r"\{\{\s*(\w+)\s*\}\}")


@dataclass(frozen=True, slots=True)
class Window:
    """The time range drawn, and the intervals Grafana would substitute for it."""

    start: float
    end: float
    step: float
    rate_interval: str

    @property
    def range_(self) -> str:
        return f"{max(1, math.ceil(self.end - self.start))}s"


def _legend(template: str, labels: dict[str, str]) -> str:
    if not template or template == "__auto":
        return ", ".join(f"{k}={v}" for k, v in sorted(labels.items()) if k != "__name__") or "value"
    return _LEGEND.sub(lambda m: labels.get(m.group(1), ""), template)


class _Prometheus:
    def __init__(self, url: str) -> None:
        self.url = url.rstrip("/")

    def get(self, path: str, params: dict[str, Any]) -> list[dict[str, Any]]:
        body = httpx.get(self.url + path, params=params, timeout=30).json()
        if body.get("status") != "success":
            raise ValueError(f"{params.get('query')}: {body.get('error')}")
        return list(body["data"]["result"])


def _draw_timeseries(ax: Any, prom: _Prometheus, queries: Sequence[PanelQuery], window: Window) -> None:
    for q in queries:
        promql = to_promql(q.expr, rate_interval=window.rate_interval, range_=window.range_)
        params = {"query": promql, "start": window.start, "end": window.end, "step": window.step}
        for series in prom.get("/api/v1/query_range", params):
            points = [(float(t), float(v)) for t, v in series["values"] if math.isfinite(float(v))]
            if points:
                xs = [datetime.fromtimestamp(t) for t, _ in points]
                ax.plot(xs, [v for _, v in points], linewidth=1.2, label=_legend(q.legend, series["metric"]))
    if ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize=6, loc="upper left", ncol=2, frameon=False)
    else:
        ax.text(0.5, 0.5, "No data", ha="center", va="center", transform=ax.transAxes, color="grey")
    ax.set_xlim(datetime.fromtimestamp(window.start), datetime.fromtimestamp(window.end))
    ax.tick_params(labelsize=6)
    ax.xaxis.set_major_formatter(_time_formatter())


def _time_formatter() -> Any:
    from matplotlib.dates import DateFormatter

    return DateFormatter("%H:%M:%S")  # type: ignore[no-untyped-call]


def _instant(prom: _Prometheus, queries: Sequence[PanelQuery], window: Window) -> list[tuple[str, float]]:
    values: list[tuple[str, float]] = []
    for q in queries:
        promql = to_promql(q.expr, rate_interval=window.rate_interval, range_=window.range_)
        for series in prom.get("/api/v1/query", {"query": promql, "time": window.end}):
            value = float(series["value"][1])
            if math.isfinite(value):
                values.append((_legend(q.legend, series["metric"]), value))
    return values


def _format(value: float, unit: str) -> str:
    if unit == "percentunit":
        return f"{value * 100:.1f} %"
    if unit == "currencyUSD":
        return f"${value:,.4f}"
    if unit == "ms":
        return f"{value:,.1f} ms"
    return f"{value:,.0f}" if abs(value) >= 100 else f"{value:,.2f}"


def _draw_stat(ax: Any, values: list[tuple[str, float]], unit: str) -> None:
    ax.axis("off")
    text = _format(sum(v for _, v in values), unit) if values else "No data"
    ax.text(0.5, 0.4, text, ha="center", va="center", fontsize=20, transform=ax.transAxes, color="#1f6f43")


def _draw_bars(ax: Any, values: list[tuple[str, float]]) -> None:
    if not values:
        ax.axis("off")
        ax.text(0.5, 0.5, "No data", ha="center", va="center", transform=ax.transAxes, color="grey")
        return
    values = sorted(values, key=lambda kv: kv[1])[-12:]
    ax.barh([k for k, _ in values], [v for _, v in values], color="#3274d9")
    ax.tick_params(labelsize=6)


def render_dashboard(
    name: str, queries: Sequence[PanelQuery], prom_url: str, window: Window, out: Path, units: dict[str, str]
) -> Path:
    """Draw one dashboard's panels where its grid puts them, and save ``out/<name>.png``."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    prom = _Prometheus(prom_url)
    panels: dict[str, list[PanelQuery]] = defaultdict(list)
    for q in queries:
        panels[q.panel].append(q)
    rows = max(q.grid.get("y", 0) + q.grid.get("h", 8) for q in queries)
    fig = plt.figure(figsize=(_WIDTH_INCHES, rows * _ROW_INCHES + 0.6))
    fig.suptitle(
        f"{name}  ({datetime.fromtimestamp(window.start):%H:%M:%S} - {datetime.fromtimestamp(window.end):%H:%M:%S})"
    )
    top = rows * _ROW_INCHES / (rows * _ROW_INCHES + 0.6)
    for title, group in panels.items():
        g = group[0].grid
        x, y, w, h = g.get("x", 0) / 24, g.get("y", 0) / rows, g.get("w", 12) / 24, g.get("h", 8) / rows
        ax = fig.add_axes((x + 0.03 * w, top * (1 - y - h) + 0.12 * h * top, w * 0.92, h * top * 0.72))
        ax.set_title(title, fontsize=8, loc="left")
        kind = group[0].panel_type
        if kind == "timeseries":
            _draw_timeseries(ax, prom, group, window)
        elif kind == "stat":
            _draw_stat(ax, _instant(prom, group, window), units.get(title, "short"))
        else:
            _draw_bars(ax, _instant(prom, group, window))
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"{name}.png"
    fig.savefig(path, dpi=80)
    plt.close(fig)
    return path


def render_all(prom_url: str, window: Window, out: Path, directory: Path = DASHBOARDS_DIR) -> list[Path]:
    """Render every dashboard in ``directory``; returns the PNG paths."""
    from gateway.dashboards.queries import load_dashboards

    units = {
        str(p.get("title")): str(((p.get("fieldConfig") or {}).get("defaults") or {}).get("unit", "short"))
        for d in load_dashboards(directory).values()
        for p in d.get("panels") or []
    }
    by_dashboard: dict[str, list[PanelQuery]] = defaultdict(list)
    for q in dashboard_queries(directory):
        by_dashboard[q.dashboard].append(q)
    return [render_dashboard(name, qs, prom_url, window, out, units) for name, qs in by_dashboard.items()]


def preview(
    prom_url: str, *, minutes: float, out: Path, rate_interval: str = "1m", end: float | None = None
) -> list[Path]:
    """Render the last ``minutes`` of every dashboard (the ``ventana dashboards-preview`` command)."""
    import time

    stop = end if end is not None else time.time()
    start = stop - minutes * 60
    window = Window(start=start, end=stop, step=max(1.0, (stop - start) / 300), rate_interval=rate_interval)
    return render_all(prom_url, window, out)
