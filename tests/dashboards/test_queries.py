"""The dashboard files are well formed, filter by model, and their docstring examples run."""

from __future__ import annotations

import doctest
import re

import yaml

import gateway.assembly.prefix
import gateway.dashboards.queries
from gateway.config import REPO_ROOT
from gateway.dashboards import dashboard_queries, load_dashboards, to_promql
from gateway.metrics import render

#: Series without a model label: the store's and the price list (joined on model instead).
_UNFILTERED = {
    "ventana_store_queue_depth",
    "ventana_store_spooled_total",
    "ventana_store_dropped_total",
    "ventana_rejected_requests_total",  # refused before a model was chosen: labelled by code only
}


def test_docstring_examples_run() -> None:
    for module in (gateway.dashboards.queries, gateway.assembly.prefix):
        result = doctest.testmod(module)
        assert result.attempted > 0 and result.failed == 0, module.__name__


def test_three_dashboards_with_unique_uids_and_panel_ids() -> None:
    dashboards = load_dashboards()
    assert set(dashboards) == {"ventana-overview", "ventana-context", "ventana-cache"}
    assert len({d["uid"] for d in dashboards.values()}) == 3
    for d in dashboards.values():
        ids = [p["id"] for p in d["panels"]]
        assert len(ids) == len(set(ids)), d["uid"]
        assert {v["name"] for v in d["templating"]["list"]} == {"datasource", "model", "instance"}


def test_every_query_reads_exported_metrics_and_follows_the_model_picker() -> None:
    exported = render()[0].decode()
    for q in dashboard_queries():
        assert q.metrics(), f"{q.panel}: reads no ventana metric"
        for metric in q.metrics():
            family = metric.removesuffix("_bucket")
            assert f"# TYPE {family.removesuffix('_total')} " in exported or f"# TYPE {family} " in exported, metric
        for metric in q.metrics() - _UNFILTERED - {"ventana_model_price"}:
            assert f'{metric}{{model=~"$model"' in q.expr, f"{q.panel}: {metric} ignores the model picker"


def test_grafana_variables_are_all_substituted() -> None:
    for q in dashboard_queries():
        assert "$" not in to_promql(q.expr), q.expr


def test_provisioning_files_point_at_the_dashboards() -> None:
    provider = yaml.safe_load((REPO_ROOT / "grafana/provisioning/dashboards/ventana.yaml").read_text())
    assert provider["providers"][0]["type"] == "file"
    datasource = yaml.safe_load((REPO_ROOT / "grafana/provisioning/datasources/ventana.yaml").read_text())
    assert datasource["datasources"][0]["type"] == "prometheus"


def test_every_query_follows_the_replica_picker() -> None:
    """Each replica is its own scrape target: every series a panel reads is filtered by ``$instance``."""
    for q in dashboard_queries():
        selectors = re.findall(r"(ventana_[a-z0-9_]+)(\{[^}]*\})?", q.expr)
        for metric, labels in selectors:
            assert 'instance=~"$instance"' in labels, f"{q.panel}: {metric} ignores the replica picker"


def test_an_import_asks_for_the_datasource_and_every_panel_uses_it() -> None:
    for name, d in load_dashboards().items():
        (wanted,) = d["__inputs"]
        assert (wanted["name"], wanted["type"], wanted["pluginId"]) == ("DS_PROMETHEUS", "datasource", "prometheus")
        (picker,) = [v for v in d["templating"]["list"] if v["name"] == "datasource"]
        assert picker["current"]["value"] == "${DS_PROMETHEUS}", name
        for panel in d["panels"]:
            assert panel["datasource"] == {"type": "prometheus", "uid": "${datasource}"}, panel["title"]


def test_every_panel_has_a_unit_and_every_graph_an_axis_label() -> None:
    for d in load_dashboards().values():
        for panel in d["panels"]:
            defaults = panel["fieldConfig"]["defaults"]
            assert defaults.get("unit"), panel["title"]
            if panel["type"] == "timeseries":
                assert defaults["custom"].get("axisLabel"), panel["title"]


def test_the_overview_shows_rejected_requests_and_an_error_ratio_from_the_first_error() -> None:
    panels = {q.panel: q.expr for q in dashboard_queries() if q.dashboard == "ventana-overview"}
    assert "ventana_rejected_requests_total" in panels["Rejected before forwarding (range)"]
    assert "ventana_rejected_requests_total" in panels["Rejected requests/s by code"]
    ratio = panels["Error ratio (range)"]
    assert "ventana_request_errors_total" in ratio, "a series started at 0 counts the first error"


def test_count_stats_are_whole_numbers_and_no_graph_changes_with_zoom() -> None:
    """Issue 37: "56.12 compactions" (``increase()`` extrapolates), and "Prefix breaks by component" changed
    with the zoom (a count per ``$__interval``): a stat that counts rounds, a graph is a rate per fixed unit."""
    for d in load_dashboards().values():
        for panel in d["panels"]:
            exprs = [t["expr"] for t in panel.get("targets", ())]
            counts = panel["fieldConfig"]["defaults"].get("unit") in ("short", "none")
            if panel["type"] == "stat" and counts and any("increase(" in e for e in exprs):
                assert all(e.startswith("round(") for e in exprs), panel["title"]
            if panel["type"] == "timeseries":
                assert not any("$__interval" in e for e in exprs), panel["title"]


def test_a_graph_with_two_units_puts_the_second_on_its_own_axis() -> None:
    """Issue 37: the store's records/s and its queue depth shared one axis."""
    for d in load_dashboards().values():
        for panel in d["panels"]:
            units = {panel["fieldConfig"]["defaults"].get("unit")}
            for override in panel["fieldConfig"].get("overrides", ()):
                props = {p["id"]: p["value"] for p in override.get("properties", ())}
                if "unit" in props:
                    units.add(props["unit"])
                    assert props.get("custom.axisPlacement") in ("right", "left"), panel["title"]
            if panel["type"] == "timeseries" and "queue depth" in panel["title"]:
                assert len(units) == 2, (panel["title"], units)
