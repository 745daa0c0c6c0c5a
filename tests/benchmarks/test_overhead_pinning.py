"""``benchmarks.overhead --pin-provider`` puts every thread of the simulator on its core and keeps the rest off it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks.overhead import PROVIDER_CORE, pin_process

CORES = os.sched_getaffinity(0)
pytestmark = pytest.mark.skipif(
    len(CORES) < 2 or PROVIDER_CORE not in CORES, reason="pinning apart needs two cores, the provider's among them"
)

#: A process with threads of its own, started before it is pinned (as the simulator's are).
THREADED = """
import threading, time
for _ in range(3):
    threading.Thread(target=time.sleep, args=(30,), daemon=True).start()
print("ready", flush=True)
time.sleep(30)
"""


def _threads(pid: int) -> list[int]:
    return [int(tid) for tid in os.listdir(f"/proc/{pid}/task")]


def test_every_thread_of_a_running_process_goes_to_the_cores_given(tmp_path: Path) -> None:
    proc = subprocess.Popen([sys.executable, "-c", THREADED], stdout=subprocess.PIPE)
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == b"ready"
        tids = _threads(proc.pid)
        assert len(tids) == 4
        assert all(os.sched_getaffinity(t) == CORES for t in tids)  # inherited: every core this test has
        pin_process(proc.pid, {PROVIDER_CORE})
        assert {t: os.sched_getaffinity(t) for t in _threads(proc.pid)} == {t: {PROVIDER_CORE} for t in tids}
        others = CORES - {PROVIDER_CORE}
        pin_process(proc.pid, others)  # and back off it, as this process keeps itself
        assert all(os.sched_getaffinity(t) == others for t in _threads(proc.pid))
    finally:
        proc.kill()
        proc.wait(10)
