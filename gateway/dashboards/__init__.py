"""Ventana's Grafana dashboards as data: their panel queries, and PNG previews without Grafana."""

from __future__ import annotations

from gateway.dashboards.queries import DASHBOARDS_DIR, PanelQuery, dashboard_queries, load_dashboards, to_promql

__all__ = ["DASHBOARDS_DIR", "PanelQuery", "dashboard_queries", "load_dashboards", "to_promql"]
