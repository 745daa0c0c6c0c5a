"""The loop-lag probe sees a blocked event loop."""

from __future__ import annotations

import asyncio
import time

from gateway.api.loop_lag import LoopLagProbe


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
