"""CPU per request of each process at c=N: the gateway's threads, the simulator, the load client.

    python -m benchmarks.process_cpu [--profile agent14k] [--clients 32] [--seconds 8] [--direct]

Starts the provider simulator (``--no-cache``) and a gateway with the default policy as
``benchmarks.profile_gateway`` does, warms it up, then sends the profile from ``--clients``
connections for ``--seconds`` and reads each process's and thread's CPU from ``/proc`` before
and after. On a shared 2-core machine the gateway and the simulator compete for the same
cores, so a c=32 rate is bounded by their CPU together: this says which of them a request
costs more of. ``--direct`` sends to the simulator instead (its CPU alone). Linux only.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import tempfile
from pathlib import Path

import gateway  # noqa: F401  (offline tiktoken)
from benchmarks.loadclient import Target, saturate, sequential
from benchmarks.profiles import MODEL, build_profiles
from tests.procs import run_gateway, run_simulator

_TICK = os.sysconf("SC_CLK_TCK")


def thread_ticks(pid: int) -> dict[str, int]:
    """User + system clock ticks of each thread of ``pid``."""
    out: dict[str, int] = {}
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            stat = Path(f"/proc/{pid}/task/{tid}/stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2 :].split()
        out[tid] = int(fields[11]) + int(fields[12])
    return out


def simulator_pid(port: str) -> int:
    """The simulator's process: the ``provider-sim`` command listening on ``port``."""
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                command = Path(f"/proc/{entry}/cmdline").read_bytes().decode(errors="replace")
            except OSError:
                continue
            if "provider-sim" in command and port in command:
                return int(entry)
    raise SystemExit(f"no simulator process on port {port}")


def per_request_ms(before: dict[str, int], after: dict[str, int], requests: float) -> list[float]:
    """ms of CPU a request of each thread that ran, in thread-id order."""
    spent = [(int(t), after[t] - before.get(t, 0)) for t in after]
    return [ticks / _TICK * 1000 / requests for _, ticks in sorted(spent) if ticks]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--profile", default="agent14k", choices=("tiny", "agent14k", "agent105k", "stream"))
    parser.add_argument("--clients", type=int, default=32)
    parser.add_argument("--seconds", type=float, default=8.0)
    parser.add_argument("--direct", action="store_true", help="send to the simulator, not through the gateway")
    args = parser.parse_args()
    profile = build_profiles((args.profile,))[0]
    with tempfile.TemporaryDirectory(prefix="ventana-cpu-") as tmp_name:
        tmp = Path(tmp_name)
        with run_simulator(tmp, record=False, cache=False) as sim:
            sim_pid = simulator_pid(sim.url.rsplit(":", 1)[1].split("/")[0])
            models = [{"name": MODEL, "litellm_model": f"openai/{MODEL}", "api_base": sim.base_url}]
            with run_gateway(tmp, {"models": models}) as gw:
                target = Target("direct", sim.base_url) if args.direct else Target("ventana", gw.base_url)
                asyncio.run(sequential(target, profile.body, 20))
                gw0, sim0, own0 = thread_ticks(gw.proc.pid), thread_ticks(sim_pid), os.times()
                rate, errors = asyncio.run(saturate(target, profile.body, args.clients, args.seconds))
                gw1, sim1, own1 = thread_ticks(gw.proc.pid), thread_ticks(sim_pid), os.times()
    requests = max(rate * args.seconds, 1.0)
    threads = per_request_ms(gw0, gw1, requests)
    client = ((own1.user - own0.user) + (own1.system - own0.system)) * 1000 / requests
    print(f"{target.name} {args.profile} c={args.clients}: {rate:.0f} req/s, {errors} errors")
    print(f"  ms of CPU a request: gateway {sum(threads):.3f} (threads {' + '.join(f'{t:.3f}' for t in threads)})")
    print(f"  simulator {sum(per_request_ms(sim0, sim1, requests)):.3f}, load client {client:.3f}")


if __name__ == "__main__":
    main()
