"""The loop-lag probe sees a blocked event loop."""

from __future__ import annotations

import asyncio
import time

from gateway.api.loop_lag import LoopLagProbe


async def test_probe_records_a_block_of_the_loop() -> None:
    probe = LoopLagProbe(interval_s=0.001)
    probe.start()
    await asyncio.sleep(0.02)
    time.sleep(0.05)  # block the loop on purpose
    await asyncio.sleep(0.02)
    await probe.stop()
    assert probe.samples > 1
    assert probe.max_ms >= 40
