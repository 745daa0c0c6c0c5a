"""A fleet in Prometheus: each replica is a scrape target; the panels add them up or show one.

Two real gateway processes answer different numbers of requests; one Prometheus scrapes
both. Every panel query must evaluate over the fleet (a per-replica gauge joined
without aggregation fails as many-to-many), the request counter must add up to the
traffic sent, and the replica picker must show each replica's own share.
"""

from __future__ import annotations

from pathlib import Path

import openai
import pytest

from gateway.dashboards import dashboard_queries, to_promql
from tests.procs import SimHandle, run_gateway, sim_models
from tests.prometheus import prometheus_binary, run_prometheus

SENT = (3, 2)  # requests to replica 0 and replica 1


@pytest.mark.skipif(prometheus_binary() is None, reason="prometheus is not installed (tests/run.sh installs it)")
def test_replicas_add_up_and_each_can_be_shown_alone(sim: SimHandle, tmp_path: Path) -> None:
    config = {"models": sim_models(sim.base_url)}
    with run_gateway(tmp_path, config) as a, run_gateway(tmp_path, config) as b:
        for gw, count in zip((a, b), SENT, strict=True):
            client = openai.OpenAI(base_url=gw.base_url, api_key="sk-client")
            for i in range(count):
                client.chat.completions.create(model="gpt-4o-mini", messages=[{"role": "user", "content": f"hi {i}"}])
        targets = [gw.url.removeprefix("http://") for gw in (a, b)]
        with run_prometheus(tmp_path, targets) as prom:
            assert prom.wait_for('count(up{job="ventana"} == 1)', 2) == 2, prom.log()
            assert prom.wait_for("sum(ventana_requests_total)", sum(SENT)) == sum(SENT), prom.log()
            for target, count in zip(targets, SENT, strict=True):
                picked = to_promql('sum(ventana_requests_total{instance=~"$instance"})', instance=target)
                assert prom.scalar(picked) == count
            for q in dashboard_queries():
                for instance in (".*", targets[0]):
                    prom.query(to_promql(q.expr, rate_interval="1m", range_="10m", instance=instance))
