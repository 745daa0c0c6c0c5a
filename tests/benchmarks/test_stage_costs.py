"""benchmarks.stage_costs times the seams of the served request path, every default on."""

from __future__ import annotations

import asyncio
import itertools
import time
from pathlib import Path

import pytest
import uvloop

from benchmarks import stage_costs
from benchmarks.profiles import MODEL, build_profiles
from benchmarks.stage_clock import StageClock
from gateway import metrics
from gateway.api import answer, chat
from gateway.api.app import create_app
from gateway.config import parse_settings
from gateway.serve import build_dependencies
from gateway.upstream import http1
from tests.procs import run_simulator


def test_every_seam_of_a_served_request_is_timed_and_the_stages_add_up(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)  # the gateway's key file
    with run_simulator(tmp_path, record=False, cache=False) as sim:
        models = [{"name": MODEL, "litellm_model": f"openai/{MODEL}", "api_base": sim.base_url}]
        settings = parse_settings({"models": models, "database_url": f"sqlite:///{tmp_path}/t.db"})
        app = create_app(settings, **build_dependencies(settings))
        clock = StageClock()
        seams = stage_costs.instrument(app.state.gateway, clock)
        try:
            profile = build_profiles(("agent14k",))[0]
            shape = stage_costs.Shape("agent14k", [profile.body] * 3, 1, "")
            results, spans = asyncio.run(stage_costs.measure(app, clock, [shape]))
        finally:
            seams.close()
    medians = results["agent14k"]
    expected = {
        "parse, check, name",
        "conversation index",
        "session load",
        "session save",
        "edge memory before",
        "edge compaction after",
        "pass clear_tool_results",
        "prefix keys",
        "after: prefix tokens",
        "served tools",
        "upstream client (http1 pool)",
        "after: lint",
        "after: metrics",
        "after: record queued",
        "edge tool_usage answered",
        stage_costs.HTTP,
        stage_costs.TOTAL,
    }
    assert expected <= set(medians)
    stages = [
        v for k, v in medians.items() if k not in (stage_costs.TOTAL, stage_costs.OTHER_THREADS, stage_costs.REFERENCE)
    ]
    assert all(v >= 0 for k, v in medians.items() if k != stage_costs.HTTP)
    assert spans["agent14k"] > 20
    assert sum(stages) == pytest.approx(medians[stage_costs.TOTAL], rel=0.5)  # medians of parts, roughly the whole
    lines = stage_costs.table(results, {"agent14k": "detail"})
    assert any(line.startswith("| pass clear_tool_results |") for line in lines)
    assert not any(line.startswith(f"| {stage_costs.TIMER} |") for line in lines)  # every request timed: no plain one


def test_every_other_request_goes_plain_and_the_loop_total_is_theirs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The timing costs a request 2-4x what its spans cost hot (a frame, a wrapper, a context variable per
    span, each clock read a syscall), so a total taken while timed named totals over budget that were not:
    with the seams, every other request is sent with the gateway's own functions back in place."""
    monkeypatch.chdir(tmp_path)  # the gateway's key file
    own = (chat.read_and_name, chat.FORWARD_PASSES, answer.request_record, metrics.observe)
    own_received = http1._Connection.data_received
    with run_simulator(tmp_path, record=False, cache=False) as sim:
        models = [{"name": MODEL, "litellm_model": f"openai/{MODEL}", "api_base": sim.base_url}]
        settings = parse_settings({"models": models, "database_url": f"sqlite:///{tmp_path}/t.db"})
        app = create_app(settings, **build_dependencies(settings))
        gw = app.state.gateway
        own_objects = (gw.recorder, gw.edges, gw.sessions, gw.upstream)
        clock = StageClock()
        seams = stage_costs.instrument(gw, clock)
        try:
            assert chat.read_and_name is not own[0] and gw.recorder is not own_objects[0]
            seams.remove()
            assert (chat.read_and_name, chat.FORWARD_PASSES, answer.request_record, metrics.observe) == own
            assert (gw.recorder, gw.edges, gw.sessions, gw.upstream) == own_objects
            seams.install()
            body = build_profiles(("tiny",))[0].body
            shape = stage_costs.Shape("tiny", [body] * 6, 2, "")

            async def run() -> tuple[dict[str, list[float]], int]:
                async with app.router.lifespan_context(app):
                    return await stage_costs.run_shape(app, clock, shape, seams=seams)

            # a plain request with a stage timed stops the run: the pool's connection, opened by the first
            # (timed) request, keeps the data_received it was given then
            samples, spans = uvloop.run(run())  # as served: uvloop's transports keep the bound method
            assert seams.installed and chat.read_and_name is not own[0]  # left as ``instrument`` left it
        finally:
            seams.close()
    assert http1._Connection.data_received is own_received and chat.read_and_name is own[0]
    # requests 2-5 measured: 2 and 4 timed, 3 and 5 plain
    assert len(samples[stage_costs.TOTAL]) == len(samples[stage_costs.TIMED_TOTAL]) == 2
    assert len(samples[stage_costs.HTTP]) == len(samples["parse, check, name"]) == 2
    assert len(samples[stage_costs.REFERENCE]) == 4 and spans > 20
    medians = {
        "parse, check, name": 30.0,
        stage_costs.TOTAL: 600.0,
        stage_costs.TIMER: 250.0,
        stage_costs.REFERENCE: stage_costs.BUDGET_REFERENCE_US,
    }
    lines = stage_costs.table({"tiny": medians}, {"tiny": "detail"})
    assert f"| {stage_costs.TIMER} | 250.0 |" in lines  # reported, never over a budget
    assert stage_costs.over_budget({"tiny": medians}) == ["tiny: parse, check, name 30.0 us > 25"]


def test_cold_caches_write_over_every_byte_of_their_buffer_each_time() -> None:
    """``--cold``: each request starts after its whole buffer was written again, with a byte it did not hold."""
    cold = stage_costs.ColdCaches(1)
    seen = []
    for _ in range(300):
        cold()
        raw = bytes(cold.buffer)
        assert raw == raw[:1] * len(raw)
        seen.append(raw[0])
    assert all(a != b for a, b in itertools.pairwise(seen)) and 0 not in seen


def test_the_steps_between_requests_run_in_order_before_each_request(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``--cold`` and ``--idle``: both run, in that order, once before each request and outside its timing."""
    monkeypatch.chdir(tmp_path)  # the gateway's key file
    ran: list[str] = []
    before = stage_costs.between(lambda: ran.append("cold"), None, lambda: ran.append("idle"))
    assert stage_costs.between(None, None) is None
    with run_simulator(tmp_path, record=False, cache=False) as sim:
        models = [{"name": MODEL, "litellm_model": f"openai/{MODEL}", "api_base": sim.base_url}]
        settings = parse_settings({"models": models, "database_url": f"sqlite:///{tmp_path}/t.db"})
        app = create_app(settings, **build_dependencies(settings))
        body = build_profiles(("tiny",))[0].body
        shape = stage_costs.Shape("tiny", [body] * 3, 1, "")
        asyncio.run(stage_costs.measure(app, StageClock(), [shape], before))
    assert ran == ["cold", "idle"] * 3


def test_budgets_scale_with_the_runs_reference_work() -> None:
    """A machine twice as slow (its reference work twice as long) has every budget doubled, so the table
    names the stages over their share, not every stage; the line under the table says by how much."""
    medians = {
        "parse, check, name": 40.0,
        "context": 40.0,
        stage_costs.TOTAL: 80.0,
        stage_costs.REFERENCE: stage_costs.BUDGET_REFERENCE_US * 2,
    }
    assert stage_costs.budget("parse, check, name", "tiny") == 25
    assert stage_costs.over_budget({"tiny": medians}) == ["tiny: context 40.0 us > 30"]
    at_the_budgets_machine = {**medians, stage_costs.REFERENCE: stage_costs.BUDGET_REFERENCE_US}
    assert len(stage_costs.over_budget({"tiny": at_the_budgets_machine})) == 2
    lines = stage_costs.table({"tiny": medians}, {"tiny": "detail"})
    assert "| context | 40.0 (30) **over** |" in lines and "| parse, check, name | 40.0 (50) |" in lines
    assert lines[-1].endswith("(tiny x2.00)")


def test_a_stage_that_awaits_is_charged_its_own_steps_not_what_the_loop_ran_meanwhile() -> None:
    """While a timed coroutine waits, another task burns CPU: that CPU is the other task's, not the stage's
    (the record's look-ahead runs in the provider's wait, and was counted twice)."""
    clock = StageClock()

    def burn(ns: int) -> None:
        until = time.thread_time_ns() + ns
        while time.thread_time_ns() < until:
            pass

    async def waits() -> str:
        burn(2_000_000)  # 2 ms of its own
        await asyncio.sleep(0.05)
        return "answered"

    async def neighbour() -> None:
        await asyncio.sleep(0.01)
        burn(20_000_000)  # 20 ms while the stage is suspended

    async def main() -> str:
        other = asyncio.ensure_future(neighbour())
        got = await clock.coro("upstream", waits)()
        await other
        return got

    assert asyncio.run(main()) == "answered"
    spent, _ = clock.take()
    assert 2_000_000 <= spent["upstream"] < 10_000_000, spent
