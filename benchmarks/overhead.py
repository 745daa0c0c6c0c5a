"""What the gateway adds to a request, measured against direct-to-provider and LiteLLM proxy in one run.

    python -m benchmarks.overhead [--rounds N] [--quick] [--floor] [--neighbour sleep=MS|burn=MS] [--pin-provider]

Starts the provider simulator with cache accounting off (``--no-cache``: pure overhead), a
Ventana gateway of this checkout with the default policy (every assembly pass on) and
LiteLLM proxy from its own venv (``benchmarks/litellm_proxy.py``). For each profile
(``benchmarks/profiles.py``) it measures the three targets interleaved request by request,
in an order shuffled (seeded) for every request, so drift of a shared machine hits all
three alike and no target always sits in the slot right after direct (measured 1-2 ms
slower than another slot on this machine):

- c=1: ``--requests`` requests per target and round, one keep-alive connection per target
  and round; added p50 = median over rounds of (target p50 - direct p50) in the same round;
  p99 from the pooled samples. Streamed: time to the first SSE event and to the end.
- c=32: 32 connections sending back to back for ``--seconds`` per target and round, the
  targets in a shuffled order per round;
  throughput and the Ventana/LiteLLM ratio are medians over rounds.

``--floor`` adds ``benchmarks/floor_proxy.py`` to the same rounds: a bare proxy on the gateway's own
stack (uvicorn, uvloop, httptools, the gateway's upstream client), so the report can say how much of
Ventana's added time is the hop any Python proxy here pays, and how much is the gateway's own work.
``--neighbour sleep=13`` adds the same proxy waiting 13 ms before it forwards: the other targets then
start each request after a wait, as they do beside LiteLLM's proxy, and on this VM that alone moves
them as LiteLLM does (RESULTS, session 43), without LiteLLM's run-to-run swing.

``--pin-provider`` is a diagnostic, not the comparison: the simulator runs on the first core and everything
else (this client, the gateways, LiteLLM, the floor) on the others, as with a provider on another machine.
On this 2-vCPU VM a proxy's request wakes the simulator on the proxy's own core (the kernel's hint for a
socket write: the writer is about to sleep), and the simulator then writes its whole stream (~0.4 ms for the
small stream) before the proxy runs again: every proxy's first byte here, the floor's too, comes after the
provider's last (RESULTS, session 45). Pinned apart, the stream's first byte measures the relay itself.

Absolute numbers are this machine's; the ratios are the result. The run prints the machine
(``benchmarks/machine.py``: the CPU, and whether an idle vCPU halts at once, which roughly doubles a
small request's added time after a wait, RESULTS, session 54) and stores it with the figures in
``benchmarks/out/overhead-<time>.json``.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import tempfile
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

import orjson
import yaml
from tqdm import tqdm

import gateway  # noqa: F401  (offline tiktoken before the profiles count tokens)
from benchmarks import machine
from benchmarks.floor_proxy import neighbour_delay, run_floor
from benchmarks.litellm_proxy import MASTER_KEY, run_litellm
from benchmarks.loadclient import Target, Timing, interleaved, saturate, sequential, shuffled
from benchmarks.profiles import MODEL, Profile, build_profiles
from tests.procs import run_gateway, run_simulator

OUT = Path(__file__).resolve().parent / "out"
#: (added p50 ms at c=1, minimum throughput ratio vs LiteLLM at c=32), from issue 11.
TARGETS = {"tiny": (1.0, 8.0), "agent14k": (1.5, 8.0), "agent105k": (4.0, 5.0), "stream": (1.0, 8.0)}
REQUESTS = {"tiny": 40, "agent14k": 30, "agent105k": 12, "stream": 40}


#: ``--pin-provider``: the simulator's core; this process and what it starts after it use the others.
PROVIDER_CORE = 0


def pin_process(pid: int, cores: set[int]) -> None:
    """Every thread of ``pid`` on ``cores`` (``sched_setaffinity`` of a pid moves one thread only)."""
    for tid in os.listdir(f"/proc/{pid}/task"):
        os.sched_setaffinity(int(tid), cores)


def keep_off_provider_core() -> None:
    """This process, and every process it starts from now on, off the provider's core."""
    others = os.sched_getaffinity(0) - {PROVIDER_CORE}
    if not others:
        raise SystemExit("--pin-provider needs two cores or more")
    pin_process(os.getpid(), others)


def variant_config(spec: str) -> dict[str, Any]:
    """``store.writer=thread,policy.tools.enabled=false`` as a nested config (values parsed as YAML)."""
    config: dict[str, Any] = {}
    for item in filter(None, spec.split(",")):
        dotted, _, raw = item.partition("=")
        *parents, leaf = dotted.strip().split(".")
        node = config
        for key in parents:
            node = node.setdefault(key, {})
        node[leaf] = yaml.safe_load(raw)
    return config


def _merge(base: dict[str, Any], extra: dict[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for key, value in extra.items():
        out[key] = _merge(out.get(key) or {}, value) if isinstance(value, dict) else value
    return out


@contextmanager
def servers(
    tmp: Path,
    *,
    litellm: bool,
    variant: str = "",
    checkout: str = "",
    checkout_variant: str = "",
    floor: bool = False,
    neighbour: str = "",
    pin_provider: bool = False,
) -> Iterator[dict[str, Target]]:
    """Start the simulator, the gateway, a variant gateway and one from another checkout (optional), the
    floor proxy (optional), LiteLLM."""
    with ExitStack() as stack:
        sim = stack.enter_context(run_simulator(tmp, record=False, cache=False))
        if pin_provider:
            assert sim.pid is not None
            pin_process(sim.pid, {PROVIDER_CORE})
        models = [{"name": MODEL, "litellm_model": f"openai/{MODEL}", "api_base": sim.base_url}]
        gw = stack.enter_context(run_gateway(tmp, {"models": models}))
        targets = {"direct": Target("direct", sim.base_url), "ventana": Target("ventana", gw.base_url)}
        if variant:
            config = _merge({"models": models, "database_url": f"sqlite:///{tmp}/variant.db"}, variant_config(variant))
            other = stack.enter_context(run_gateway(tmp, config))
            targets[f"ventana[{variant}]"] = Target("variant", other.base_url)
        if checkout:
            config = _merge(
                {"models": models, "database_url": f"sqlite:///{tmp}/checkout.db"}, variant_config(checkout_variant)
            )
            other = stack.enter_context(run_gateway(tmp, config, env={"PYTHONPATH": str(Path(checkout).resolve())}))
            targets[f"ventana[{Path(checkout).name}]"] = Target("checkout", other.base_url)
        if floor:
            targets["floor"] = Target("floor", stack.enter_context(run_floor(tmp, sim.url)))
        if neighbour:
            delay = neighbour_delay(neighbour)
            if delay is None:
                raise SystemExit(f"--neighbour takes sleep=MS or burn=MS, not {neighbour!r}")
            targets["neighbour"] = Target("neighbour", stack.enter_context(run_floor(tmp, sim.url, **delay)))
        if litellm:
            url, startup = stack.enter_context(run_litellm(tmp, sim.base_url, MODEL))
            print(f"LiteLLM proxy answered after {startup:.1f} s")
            targets["litellm"] = Target("litellm", url, api_key=MASTER_KEY)
        yield targets


def _p(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def _ms(timings: list[Timing], attr: str) -> list[float]:
    return [getattr(t, attr) * 1000 for t in timings]


async def latency(targets: dict[str, Target], profile: Profile, rounds: int, n: int, bar: tqdm[Any]) -> dict[str, Any]:
    """c=1: per target, per round median; added = median over rounds of (target - direct)."""
    attrs = ("first", "end") if profile.stream else ("end",)
    samples: dict[str, dict[str, list[float]]] = {t: {a: [] for a in attrs} for t in targets}
    per_round: dict[str, dict[str, list[float]]] = {t: {a: [] for a in attrs} for t in targets}
    for r in range(rounds):
        for name, timings in (await interleaved(targets, profile.body, n, seed=r)).items():
            bad = [t.status for t in timings if t.status != 200]
            if bad:
                raise RuntimeError(f"{name} answered {bad[0]} on profile {profile.name}")
            for a in attrs:
                values = _ms(timings, a)
                samples[name][a] += values
                per_round[name][a].append(statistics.median(values))
            bar.update(1)
    out: dict[str, Any] = {}
    for name in targets:
        for a in attrs:
            added = [x - d for x, d in zip(per_round[name][a], per_round["direct"][a], strict=True)]
            out[f"{name}.{a}.p50"] = statistics.median(per_round[name][a])
            out[f"{name}.{a}.added_p50"] = statistics.median(added)
            out[f"{name}.{a}.added_p99"] = _p(samples[name][a], 0.99) - _p(samples["direct"][a], 0.99)
    return out


async def throughput(
    targets: dict[str, Target], profile: Profile, rounds: int, seconds: float, bar: tqdm[Any]
) -> dict[str, Any]:
    """c=32: requests per second per target, and Ventana/LiteLLM per round."""
    # a slow neighbour's rate means nothing (32 clients queue behind its 13 ms a request, past their timeout)
    measured = {name: target for name, target in targets.items() if name != "neighbour"}
    rates: dict[str, list[float]] = {t: [] for t in measured}
    for r in range(rounds):
        for name, target in shuffled(measured, r):
            rate, errors = await saturate(target, profile.body, 32, seconds)
            if errors:
                raise RuntimeError(f"{name}: {errors} failed requests at c=32 on profile {profile.name}")
            rates[name].append(rate)
            bar.update(1)
    out: dict[str, Any] = {f"{t}.rps": statistics.median(r) for t, r in rates.items()}  # names may hold dots
    if "litellm" in rates:
        ratios = [v / max(lite, 1e-9) for v, lite in zip(rates["ventana"], rates["litellm"], strict=True)]
        out["ventana_over_litellm"] = statistics.median(ratios)
    return out


async def warm_up(targets: dict[str, Target], profiles: list[Profile]) -> None:
    for profile in profiles:
        for target in targets.values():
            await sequential(target, profile.body, 3)


async def measure(targets: dict[str, Target], profiles: list[Profile], args: argparse.Namespace) -> dict[str, Any]:
    scale = 0.5 if args.quick else 1.0
    cells = len(profiles) * args.rounds * (2 * len(targets) - ("neighbour" in targets))
    results: dict[str, Any] = {}
    with tqdm(total=cells, desc="overhead", unit="cell") as bar:
        await warm_up(targets, profiles)
        for profile in profiles:
            n = max(5, int(REQUESTS[profile.name] * scale))
            results[profile.name] = await latency(targets, profile, args.rounds, n, bar)
        for profile in profiles:
            results[profile.name].update(await throughput(targets, profile, args.rounds, args.seconds * scale, bar))
    return results


def report(results: dict[str, Any], profiles: list[Profile]) -> str:
    """A markdown table of the run, with each target checked."""
    floor = any("floor.end.added_p50" in results[p.name] for p in profiles)
    lines = [
        "| profile | msgs | tokens | Ventana added p50 (p99) ms | LiteLLM added p50 (p99) ms "
        + ("| floor added p50 ms (Ventana's own) " if floor else "")
        + "| c=32 req/s direct / Ventana / LiteLLM | Ventana/LiteLLM | target met |",
        "| --- | --- | --- | --- | --- |" + (" --- |" if floor else "") + " --- | --- | --- |",
    ]
    for p in profiles:
        r = results[p.name]
        p50_max, ratio_min = TARGETS[p.name]
        attrs = ("first", "end") if p.stream else ("end",)
        vent = " / ".join(f"{r[f'ventana.{a}.added_p50']:+.2f} ({r[f'ventana.{a}.added_p99']:+.2f})" for a in attrs)
        suffix = ".end.added_p50"
        for name in [k[: -len(suffix)] for k in r if k.startswith("ventana[") and k.endswith(suffix)]:
            other = " / ".join(f"{r[f'{name}.{a}.added_p50']:+.2f}" for a in attrs)
            vent += f"; {name}: {other}, {r[f'{name}.rps']:.0f} req/s"
        lite = " / ".join(
            f"{r[f'litellm.{a}.added_p50']:+.2f} ({r[f'litellm.{a}.added_p99']:+.2f})"
            for a in attrs
            if f"litellm.{a}.added_p50" in r
        )
        if "neighbour.end.added_p50" in r:  # no LiteLLM: the slow neighbour in its place
            slow = " / ".join(f"{r[f'neighbour.{a}.added_p50']:+.2f}" for a in attrs)
            lite += f"{'; ' if lite else ''}neighbour {slow}"
        ratio = r.get("ventana_over_litellm")
        met_p50 = all(r[f"ventana.{a}.added_p50"] <= p50_max for a in attrs)
        met_ratio = ratio is None or ratio >= ratio_min
        rps = " / ".join(f"{r[k]:.0f}" for k in ("direct.rps", "ventana.rps", "litellm.rps") if k in r)
        hop = ""
        if floor:  # the floor's added time, and Ventana's less the floor's: the gateway's own work
            hop = " / ".join(
                f"{r[f'floor.{a}.added_p50']:+.2f} ({r[f'ventana.{a}.added_p50'] - r[f'floor.{a}.added_p50']:+.2f})"
                for a in attrs
            )
            hop = f" {hop} |"
        name = f"{p.name}{' (first / end)' if p.stream else ''}"
        lines.append(
            f"| {name} | {p.messages} | {p.tokens} | {vent} | {lite or '-'} |{hop} {rps} "
            f"| {f'{ratio:.1f}x' if ratio else '-'} | "
            f"{'yes' if met_p50 and met_ratio else 'NO'} (<= {p50_max} ms, >= {ratio_min}x) |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5, help="interleaved rounds per cell (default 5)")
    parser.add_argument("--quick", action="store_true", help="smoke run: 2 rounds, half the requests and time")
    parser.add_argument("--seconds", type=float, default=1.5, help="seconds per c=32 cell (default 1.5)")
    parser.add_argument("--profiles", default="tiny,agent14k,agent105k,stream")
    parser.add_argument("--no-litellm", action="store_true", help="skip LiteLLM (no throughput ratios)")
    parser.add_argument(
        "--floor",
        action="store_true",
        help="also measure the floor proxy (benchmarks/floor_proxy.py: the hop alone on the same stack), "
        "and report Ventana's added time less the floor's",
    )
    parser.add_argument(
        "--neighbour",
        default="",
        metavar="sleep=MS|burn=MS",
        help="also send requests to a slow neighbour, a floor proxy that waits or computes MS ms before "
        "forwarding: with --no-litellm, what LiteLLM's presence does to the other targets, without LiteLLM",
    )
    parser.add_argument(
        "--variant",
        default="",
        help="also measure a second gateway with these config changes, interleaved "
        "(e.g. store.writer=thread or policy.tools.enabled=false)",
    )
    parser.add_argument(
        "--checkout",
        default="",
        help="also measure the gateway of another checkout of this repo (e.g. a git worktree of an older "
        "commit), interleaved: before/after comparisons in one run",
    )
    parser.add_argument(
        "--checkout-variant",
        default="",
        help="config changes for the --checkout gateway, as --variant (e.g. session_state=database)",
    )
    parser.add_argument(
        "--pin-provider",
        action="store_true",
        help="diagnostic: the simulator alone on the first core, the rest on the others (as a provider on "
        "another machine); not the comparison the targets are for",
    )
    args = parser.parse_args()
    if args.pin_provider:
        keep_off_provider_core()
    if args.quick:
        args.rounds = min(args.rounds, 2)
    host = machine.describe()  # before any process of the run starts
    profiles = build_profiles(tuple(args.profiles.split(",")))
    try:
        import uvloop

        uvloop.install()
    except ImportError:
        pass
    with (
        tempfile.TemporaryDirectory(prefix="ventana-bench-") as tmp,
        servers(
            Path(tmp),
            litellm=not args.no_litellm,
            variant=args.variant,
            checkout=args.checkout,
            checkout_variant=args.checkout_variant,
            floor=args.floor,
            neighbour=args.neighbour,
            pin_provider=args.pin_provider,
        ) as t,
    ):
        results = asyncio.run(measure(t, profiles, args))
    table = report(results, profiles)
    print(machine.summary(host))
    print(table)
    OUT.mkdir(exist_ok=True)
    out = OUT / f"overhead-{time.strftime('%Y%m%d-%H%M%S')}.json"
    raw = {"args": vars(args), "machine": host, "results": results}
    out.write_bytes(orjson.dumps(raw, option=orjson.OPT_INDENT_2))
    print(f"raw numbers: {out}")


if __name__ == "__main__":
    main()
