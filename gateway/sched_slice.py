"""Ask Linux for a short scheduling slice for the event loop's thread, so its I/O wakes it promptly.

A gateway shares its cores: with a local provider (llama.cpp, the simulator), other services, its
own store writer. Linux's EEVDF scheduler (6.6+) runs a woken task ahead of the running one only
when the woken task's virtual deadline is earlier, and the deadline is its vruntime plus its slice
(1.4 ms here by default). The loop thread spends CPU on every request, so when the provider's first
bytes woke it, the provider, which had just been woken by the gateway's request on the same core,
ran on to the end of its answer first: on this 2-vCPU VM the whole small stream (~0.4 ms) was written
before the gateway read its first event, and every proxy's first byte came after the provider's last
(RESULTS, session 45). A task may ask for a shorter slice (``sched_setattr`` with
``sched_runtime``, Linux 6.12+, no privilege needed): its deadlines come sooner, so it is run when its
I/O arrives; its share of the CPU is unchanged. Older kernels take the call and ignore the slice.

Only the thread that calls ``request_slice`` changes (threads and processes it starts afterwards
inherit it): the app's lifespan calls it on the loop's thread after the store writer started, so the
writer keeps the default slice, and asks again for the slice it found when the app stops.
"""

from __future__ import annotations

import ctypes
import logging
import os
import platform
import sys

log = logging.getLogger("ventana")

#: ``sched_setattr`` / ``sched_getattr`` syscall numbers by machine (glibc has no wrappers).
_SYSCALLS = {"x86_64": (314, 315), "aarch64": (274, 275)}
#: The range Linux clamps a requested slice to, in us.
MIN_SLICE_US, MAX_SLICE_US = 100.0, 100_000.0


class _SchedAttr(ctypes.Structure):
    _fields_ = [
        ("size", ctypes.c_uint32),
        ("sched_policy", ctypes.c_uint32),
        ("sched_flags", ctypes.c_uint64),
        ("sched_nice", ctypes.c_int32),
        ("sched_priority", ctypes.c_uint32),
        ("sched_runtime", ctypes.c_uint64),
        ("sched_deadline", ctypes.c_uint64),
        ("sched_period", ctypes.c_uint64),
        ("sched_util_min", ctypes.c_uint32),
        ("sched_util_max", ctypes.c_uint32),
    ]


def current_slice_us(tid: int = 0) -> float | None:
    """The slice of thread ``tid`` (0: this one) in us as the kernel reports it; None where it cannot be read."""
    found = _get(tid)
    return None if found is None else found.sched_runtime / 1000


def request_slice(us: float) -> bool:
    """Ask for a slice of ``us`` (clamped to Linux's 0.1-100 ms) for the calling thread, keeping its policy and
    nice value; whether the kernel took the request. Never raises: where it is not Linux, the machine is not
    one this knows, or the call fails, the thread keeps its slice and the gateway serves as before."""
    numbers = _numbers()
    attr = _get()
    if numbers is None or attr is None:
        return False
    if attr.sched_policy != 0:  # SCHED_OTHER only: a real-time or batch policy was an operator's choice
        return False
    attr.size = ctypes.sizeof(attr)
    attr.sched_flags = 0
    attr.sched_runtime = int(min(max(us, MIN_SLICE_US), MAX_SLICE_US) * 1000)
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.syscall(numbers[0], 0, ctypes.byref(attr), 0) != 0:
        log.info("scheduling: the loop's slice was not changed (%s)", os.strerror(ctypes.get_errno()))
        return False
    return True


def give_way() -> None:
    """Let a task the loop just woke on its core run before the loop goes on.

    The short slice makes the loop's virtual deadline early, so a task it wakes on its own core (the
    client, reading the answer just written) does not preempt it: it waited while the loop did the
    request's bookkeeping after the answer (~0.15 ms of CPU for a small request, more after a wait).
    ``sched_yield`` moves the loop's deadline one slice on (EEVDF's yield), so that task runs first;
    with no other task runnable here it returns at once. Called only where a slice was asked for."""
    os.sched_yield()


def _numbers() -> tuple[int, int] | None:
    if not sys.platform.startswith("linux"):
        return None
    return _SYSCALLS.get(platform.machine())


def _get(tid: int = 0) -> _SchedAttr | None:
    numbers = _numbers()
    if numbers is None:
        return None
    attr = _SchedAttr()
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.syscall(numbers[1], tid, ctypes.byref(attr), ctypes.sizeof(attr), 0) != 0:
        return None
    return attr
