"""The loop-lag probe sees a blocked event loop."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import httpx
import openai
import pytest
import uvloop
from prometheus_client.parser import text_string_to_metric_families

from gateway.api.loop_lag import LoopLagProbe
from gateway.config import parse_settings
from gateway.errors import ConfigError
from tests.procs import SimHandle, run_gateway, sim_models


async def test_probe_records_a_block_of_the_loop() -> None:
    probe = LoopLagProbe(interval_s=0.001)
    probe.start()
    await asyncio.sleep(0.02)
    cpu = time.thread_time()
    while time.thread_time() - cpu < 0.03:  # block the loop with 30 ms of CPU, as a slow call would
        pass
    await asyncio.sleep(0.02)
    await probe.stop()
    assert probe.samples > 1
    assert probe.max_busy_ms >= 29
    assert probe.max_ms >= 29  # wall time is at least the CPU time


async def test_callback_timer_names_the_task_that_blocked_the_loop() -> None:
    from asyncio.events import Handle

    from gateway.api.loop_lag import CallbackTimer

    original = Handle._run
    timer = CallbackTimer()
    timer.install()

    async def slow_step() -> None:
        await asyncio.sleep(0)
        cpu = time.thread_time()
        while time.thread_time() - cpu < 0.02:  # one step of this task holds the loop for 20 ms of CPU
            pass

    async def quick_step() -> None:
        await asyncio.sleep(0)

    try:
        await asyncio.gather(slow_step(), *(quick_step() for _ in range(10)))
    finally:
        timer.uninstall()
    assert Handle._run is original
    assert timer.callbacks > 10
    ms, name = max(timer.slowest)
    assert ms >= 19 and "slow_step (" in name and name.endswith("-> done)"), name
    assert sorted(timer.slowest)[-2][0] < 5  # the other callbacks were short, and measured apart


def test_a_served_gateway_times_its_loop_callbacks(sim: SimHandle, tmp_path: Path) -> None:
    """With ``diagnostics.time_callbacks`` every request's task steps land in the callback histogram."""
    diagnostics = {"loop_lag_probe_ms": 1, "time_callbacks": True}
    with run_gateway(tmp_path, {"models": sim_models(sim.base_url), "diagnostics": diagnostics}) as gw:
        client = openai.OpenAI(base_url=gw.base_url, api_key="sk-test", max_retries=0)
        for i in range(5):
            client.chat.completions.create(model="gpt-4o-mini", messages=[{"role": "user", "content": f"hi {i}"}])
        families = {f.name: f for f in text_string_to_metric_families(httpx.get(gw.url + "/metrics").text)}
    samples = {s.name: s.value for s in families["ventana_event_loop_callback_ms"].samples}
    assert samples["ventana_event_loop_callback_ms_count"] > 5 * 3  # a request takes several task steps
    assert 0 < samples["ventana_event_loop_callback_ms_sum"] < samples["ventana_event_loop_callback_ms_count"] * 5
    lag = {s.name: s.value for s in families["ventana_event_loop_lag_ms"].samples}
    assert lag["ventana_event_loop_lag_ms_count"] > 0


def test_a_probe_under_a_millisecond_is_refused() -> None:
    """uvloop keeps timers in whole milliseconds: a shorter interval would spin the loop, so it is refused."""
    with pytest.raises(ConfigError, match=r"diagnostics\.loop_lag_probe_ms"):
        parse_settings({"diagnostics": {"loop_lag_probe_ms": 0.5}})
    assert parse_settings({"diagnostics": {"loop_lag_probe_ms": 1}}).diagnostics.loop_lag_probe_ms == 1


def test_uvloop_rounds_a_sub_millisecond_sleep_to_none() -> None:
    """Why the probe's floor is 1 ms: on the server's loop a 0.5 ms sleep returns at once, every time (when
    uvloop keeps finer timers this fails, and the floor can go)."""

    async def sleeps_in(seconds: float) -> int:
        loop, n = asyncio.get_running_loop(), 0
        end = loop.time() + seconds
        while loop.time() < end:
            await asyncio.sleep(0.0005)
            n += 1
        return n

    n = uvloop.run(sleeps_in(0.05))
    assert n > 1000, f"{n} sleeps of 0.5 ms in 50 ms: uvloop now keeps sub-millisecond timers"
