"""The simulator's fault switches: what can be queued, and clear refusals for what cannot."""

from __future__ import annotations

import httpx
import pytest

from gateway.providersim.faults import FaultPlan
from tests.procs import SimHandle


def test_close_faults_are_counted_for_the_cutter_not_queued() -> None:
    plan = FaultPlan()
    closes = plan.load({"faults": [{"kind": "close", "times": 2}, {"kind": "status", "status": 503, "times": 3}]})
    assert closes == 2
    assert plan.pending() == 3
    assert [plan.take().status for _ in range(3)] == [503, 503, 503]  # type: ignore[union-attr]
    assert plan.take() is None


def test_unknown_kind_is_refused_with_the_known_ones() -> None:
    with pytest.raises(ValueError, match="drop_stream"):
        FaultPlan().load({"faults": [{"kind": "meteor"}]})


def test_the_control_route_answers_400_for_faults_it_cannot_apply(sim: SimHandle) -> None:
    unknown = httpx.post(sim.url + "/_sim/faults", json={"faults": [{"kind": "meteor"}]})
    assert unknown.status_code == 400 and "meteor" in unknown.text
    no_cutter = httpx.post(sim.url + "/_sim/faults", json={"faults": [{"kind": "close"}]})
    assert no_cutter.status_code == 400 and "--cut-port" in no_cutter.text
