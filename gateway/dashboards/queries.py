"""Read the panel queries out of the dashboard JSON files and make them plain PromQL.

The dashboards in ``grafana/dashboards`` are the product; tests and the preview renderer
read them rather than keeping a second list of queries that could drift. Grafana fills in
a few variables before it sends a query (``$model``, ``$instance``, ``$__rate_interval``,
``$__range``); ``to_promql`` does the same, so the exact text of every panel can be sent to Prometheus.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gateway.config import REPO_ROOT

DASHBOARDS_DIR = REPO_ROOT / "grafana" / "dashboards"
_METRIC = re.compile(r"\bventana_[a-z0-9_]+")


@dataclass(frozen=True, slots=True)
class PanelQuery:
    """One query of one panel: where it is shown and its PromQL with Grafana's variables in it."""

    dashboard: str
    panel: str
    panel_type: str
    ref_id: str
    expr: str
    legend: str
    grid: Mapping[str, int]

    def metrics(self) -> frozenset[str]:
        """The ``ventana_*`` series names the query reads."""
        return frozenset(_METRIC.findall(self.expr))


def load_dashboards(directory: Path = DASHBOARDS_DIR) -> dict[str, dict[str, Any]]:
    """Every dashboard JSON in ``directory``, by file stem, in name order."""
    return {path.stem: json.loads(path.read_text()) for path in sorted(directory.glob("*.json"))}


def _panels(panels: list[dict[str, Any]]) -> Iterator[dict[str, Any]]:
    for panel in panels:
        yield panel
        yield from _panels(panel.get("panels") or [])  # panels folded inside a row


def dashboard_queries(directory: Path = DASHBOARDS_DIR) -> list[PanelQuery]:
    """Every target of every panel of every dashboard, rows included."""
    found: list[PanelQuery] = []
    for name, dashboard in load_dashboards(directory).items():
        for panel in _panels(dashboard.get("panels") or []):
            for target in panel.get("targets") or []:
                if target.get("expr"):
                    found.append(
                        PanelQuery(
                            dashboard=name,
                            panel=str(panel.get("title", "")),
                            panel_type=str(panel.get("type", "")),
                            ref_id=str(target.get("refId", "")),
                            expr=str(target["expr"]),
                            legend=str(target.get("legendFormat", "")),
                            grid=dict(panel.get("gridPos") or {}),
                        )
                    )
    return found


def to_promql(
    expr: str, *, rate_interval: str = "1m", range_: str = "1h", model: str = ".*", instance: str = ".*"
) -> str:
    """Replace Grafana's variables the way Grafana would for an "All models, every replica" view.

    >>> to_promql('rate(x{model=~"$model"}[$__rate_interval])', rate_interval="30s")
    'rate(x{model=~".*"}[30s])'
    """
    return (
        expr.replace("$__rate_interval", rate_interval)
        .replace("$__range", range_)
        .replace("$__interval", rate_interval)
        .replace("${model}", model)
        .replace("$model", model)
        .replace("${instance}", instance)
        .replace("$instance", instance)
    )
