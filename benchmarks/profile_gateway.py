"""Where the gateway's own time goes: py-spy samples a served gateway under load.

    python -m benchmarks.profile_gateway [--profile tiny] [--clients 32] [--seconds 8] [--config session_state=database]

Starts the provider simulator (``--no-cache``) and a gateway with the default policy,
warms it up, then attaches ``py-spy record`` (raw collapsed stacks) to the gateway process
while ``--clients`` connections send the profile back to back. Prints the functions with
the most samples on top of the stack (self) and on it at all (cumulative), the latter
limited to frames that are not the server's scaffolding, and the gateway's CPU time
per request. Needs ``pip install py-spy``.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import shutil
import subprocess
import tempfile
from pathlib import Path

import gateway  # noqa: F401  (offline tiktoken)
from benchmarks.loadclient import Target, saturate, sequential
from benchmarks.overhead import variant_config
from benchmarks.profiles import MODEL, build_profiles
from tests.procs import run_gateway, run_simulator

RATE_HZ = 250
_SCAFFOLDING = ("click/", "runpy", "uvicorn/main.py", "uvicorn/server.py", "uvicorn/_compat", "gateway/cli.py")


def top_frames(raw: Path, n: int) -> tuple[int, list[tuple[str, int]], list[tuple[str, int]]]:
    """Total samples, the ``n`` hottest self frames and cumulative frames of a py-spy raw file."""
    own: collections.Counter[str] = collections.Counter()
    cumulative: collections.Counter[str] = collections.Counter()
    total = 0
    for line in raw.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        samples = int(count)
        total += samples
        frames = stack.split(";")
        own[frames[-1]] += samples
        for frame in set(frames):
            if not any(s in frame for s in _SCAFFOLDING):
                cumulative[frame] += samples
    return total, own.most_common(n), cumulative.most_common(n)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--profile", default="tiny", choices=("tiny", "agent14k", "agent105k", "stream"))
    parser.add_argument("--clients", type=int, default=32)
    parser.add_argument("--seconds", type=float, default=8.0)
    parser.add_argument("--top", type=int, default=25)
    parser.add_argument("--config", default="", help="config changes as in overhead --variant: session_state=database")
    parser.add_argument("--stacks", default="", help="also keep py-spy's raw stacks here (for flame graphs, grep)")
    args = parser.parse_args()
    if shutil.which("py-spy") is None:
        raise SystemExit("py-spy is not installed: pip install py-spy")
    profile = build_profiles((args.profile,))[0]
    with tempfile.TemporaryDirectory(prefix="ventana-profile-") as tmp_name:
        tmp = Path(tmp_name)
        with run_simulator(tmp, record=False, cache=False) as sim:
            models = [{"name": MODEL, "litellm_model": f"openai/{MODEL}", "api_base": sim.base_url}]
            with run_gateway(tmp, {"models": models, **variant_config(args.config)}) as gw:
                target = Target("ventana", gw.base_url)
                asyncio.run(sequential(target, profile.body, 20))
                out = tmp / "stacks.txt"
                spy = subprocess.Popen(
                    [
                        *("py-spy", "record", "-p", str(gw.proc.pid), "-d", str(int(args.seconds))),
                        *("-r", str(RATE_HZ), "-f", "raw", "-o", str(out), "--nonblocking"),
                    ],
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                )
                rate, errors = asyncio.run(saturate(target, profile.body, args.clients, args.seconds))
                spy.wait()
        total, own, cumulative = top_frames(out, args.top)
        if args.stacks:
            shutil.copyfile(out, args.stacks)
    requests = rate * args.seconds
    print(f"{args.profile} at c={args.clients}: {rate:.0f} req/s, {errors} errors, {total} busy samples")
    print(f"gateway CPU per request ~{total / RATE_HZ / max(requests, 1) * 1000:.2f} ms (busy samples / requests)")
    print("\nself (top of stack):")
    for frame, n in own:
        print(f"  {n / total:6.1%}  {frame}")
    print("\ncumulative (on the stack):")
    for frame, n in cumulative:
        print(f"  {n / total:6.1%}  {frame}")


if __name__ == "__main__":
    main()
