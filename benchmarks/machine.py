"""What a latency figure depends on besides the code: the machine it was measured on, in one line.

The same gateway reads +0.55 ms on one of this workplace's machines and +1.3 on another (RESULTS,
sessions 52-54). Most of the difference is the CPU and, on a virtual machine, what an idle vCPU
does: a guest whose ``haltpoll`` driver polls for 0 ns halts at once, and a process that waited a
few milliseconds then runs its next request on a vCPU the host had put to sleep (session 54). So
``benchmarks.overhead`` prints and stores this next to its figures, and a reader comparing two runs
can tell a code change from a machine change.

Every value is read from ``/proc`` and ``/sys``; what a machine does not have is ``None``.
"""

from __future__ import annotations

import os
import platform
from pathlib import Path
from typing import Any

#: The guest's polling before it halts an idle vCPU (the ``haltpoll`` cpuidle driver of a KVM guest).
HALT_POLL_NS = Path("/sys/module/haltpoll/parameters/guest_halt_poll_ns")
CPUIDLE = Path("/sys/devices/system/cpu/cpuidle")


def _read(path: Path) -> str | None:
    try:
        return path.read_text().strip() or None
    except OSError:
        return None


def cpu_model(cpuinfo: str | None) -> str | None:
    """The first ``model name`` of ``/proc/cpuinfo``'s text (x86; other machines may have none)."""
    for line in (cpuinfo or "").splitlines():
        key, _, value = line.partition(":")
        if key.strip() == "model name" and value.strip():
            return value.strip()
    return None


def describe(sys_root: Path = Path("/")) -> dict[str, Any]:
    """The machine as the figures need it: CPU, vCPUs, kernel, how idle vCPUs sleep, the load right now (so a
    benchmark asks before it starts anything: afterwards the load is its own)."""
    root = sys_root.resolve()

    def under(path: Path) -> Path:
        return root / path.relative_to("/")

    halt_poll = _read(under(HALT_POLL_NS))
    load = os.getloadavg() if root == Path("/") else None
    return {
        "cpu": cpu_model(_read(under(Path("/proc/cpuinfo")))),
        "cpus": os.cpu_count(),
        "kernel": platform.release(),
        "cpuidle_driver": _read(under(CPUIDLE / "current_driver")),
        "guest_halt_poll_ns": int(halt_poll) if halt_poll is not None and halt_poll.isdigit() else None,
        "load_1m": round(load[0], 2) if load else None,
    }


def summary(machine: dict[str, Any]) -> str:
    """One line for a benchmark's output, saying when idle vCPUs halt without polling."""
    parts = [machine["cpu"] or "unknown CPU", f"{machine['cpus']} CPUs", f"kernel {machine['kernel']}"]
    if machine["cpuidle_driver"]:
        parts.append(f"cpuidle {machine['cpuidle_driver']}")
    poll = machine["guest_halt_poll_ns"]
    if poll is not None:
        parts.append(f"guest_halt_poll_ns {poll}" + (" (an idle vCPU halts at once)" if poll == 0 else ""))
    if machine["load_1m"] is not None:
        parts.append(f"load {machine['load_1m']} before the run")
    return "machine: " + ", ".join(parts)
