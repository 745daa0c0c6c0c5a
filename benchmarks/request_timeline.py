"""Where a request's added wall time goes: the gateway and the floor proxy, seam by seam, in one run.

    python -m benchmarks.request_timeline [--profile stream] [--rounds 6] [--requests 100]

``benchmarks.overhead`` says how much the gateway adds; ``benchmarks.stage_costs`` what each stage
costs in CPU. Neither says where the added *wall* time lies: before the forward, in the provider's
wait, or between the provider's answer and the client's. This starts the provider simulator, a gateway
(default config) and the floor proxy (``benchmarks.floor_proxy``) with ``benchmarks.timeline_hooks``
installed in the two proxies, sends the profile to direct, gateway and floor interleaved at c=1
(``loadclient.interleaved``), and prints, per proxy, the median of each segment of a request:

- before the forward: the request's last byte in to the upstream request begun (parse, assembly, ...);
- the forward's write: the upstream request's bytes written (a socket write that wakes the provider);
- the provider: written to the provider's first bytes read;
- to the head: those bytes to the response's head (``http.response.start``) begun, and its write;
- the body: the head to the first body, and the first body to the end (a stream's last write);

and then the gateway's own seams (``GATEWAY_SEGMENTS``): the middleware, admission, parsing and naming,
the assembly, the record before the forward; the provider's answer read and the journal after it.

The first requests of each proxy (``--skip``) are left out (connections, caches). Absolute figures are
this machine's; the two proxies' difference per segment is the result.

``--neighbour litellm`` (or ``burn=MS``, ``sleep=MS``: ``benchmarks.overhead``'s slow floor) adds a fourth
target to the interleaved rounds, unmarked: LiteLLM's proxy, as in ``benchmarks.overhead``'s run. Its
10-20 ms of Python between the proxies' requests leaves their code and data out of the caches, and the
gateway's figure there is about twice the one without it (session 53); this says on which seams that
second half lies.

``--growing N`` asks where a growing agent turn's time lies instead: the ``benchmarks.growing_session``
bodies (one session, one round longer each request, 13K to 210K tokens) sent to direct and the gateway,
every tenth also resent 5 times (the fixed shape at that length), and per history bucket the
gateway's median before the forward and in to end written, growing against fixed, with the client's added
time: what a new round costs the gateway, and on which side of the forward.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import tempfile
from collections.abc import Iterable, Sequence
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import gateway  # noqa: F401  (offline tiktoken before the profiles count tokens)
from benchmarks.floor_proxy import neighbour_delay, run_floor
from benchmarks.litellm_proxy import MASTER_KEY, run_litellm
from benchmarks.loadclient import Connection, Target, Timing, interleaved, shuffled
from benchmarks.overhead import variant_config
from benchmarks.profiles import MODEL, build_profiles
from benchmarks.timeline_hooks import DIR_VARIABLE
from tests.procs import REPO_ROOT, GatewayHandle, SimHandle, run_gateway, run_simulator

#: The segments reported, as (label, from mark, to mark).
SEGMENTS: tuple[tuple[str, str, str], ...] = (
    ("before the forward", "in", "forward"),
    ("the forward's write", "forward", "forward sent"),
    ("the provider", "forward sent", "provider"),
    ("provider to head", "provider", "head"),
    ("head write", "head", "head sent"),
    ("head to first body", "head sent", "body"),
    ("first body write", "body", "body sent"),
    ("first body to end", "body sent", "end"),
    ("end write", "end", "end sent"),
    ("in to end written", "in", "end sent"),
)
#: Seams only the gateway has (``timeline_hooks._mark_gateway_seams``), as (label, from mark, to mark): where
#: its part before the forward and after the provider's answer goes. A stream's answer is read and relayed
#: between ``reached`` (the provider's head) and its journal.
GATEWAY_SEGMENTS: tuple[tuple[str, str, str], ...] = (
    ("server and middleware", "in", "door"),
    ("admission and body read", "door", "turn"),
    ("parse, name, load, edges before", "turn", "assemble"),
    ("assembly and its bookkeeping", "assemble", "forwarded"),
    ("record, flight, upstream client", "forwarded", "forward"),
    ("the provider's answer read", "provider", "reached"),
    ("answer read to the journal", "reached", "journal"),
    ("the journal", "journal", "journaled"),
)
_SITECUSTOMIZE = f"""import os
if os.environ.get({DIR_VARIABLE!r}):
    import benchmarks.timeline_hooks
    benchmarks.timeline_hooks.install()
"""


def requests_of(marks: Iterable[tuple[str, int]]) -> list[dict[str, int]]:
    """The marks of one process split per request (from each ``in``): each kind's first time, except
    ``forward``, whose last before the provider's first bytes counts (a new connection begins twice)."""
    found: list[dict[str, int]] = []
    current: dict[str, int] | None = None
    for kind, at in marks:
        if kind == "in":
            current = {"in": at}
            found.append(current)
        elif current is not None:
            if kind == "forward" and "provider" not in current:
                current["forward"] = at
            else:
                current.setdefault(kind, at)
    return found


def segments(requests: Sequence[dict[str, int]], seams: Sequence[tuple[str, str, str]] = SEGMENTS) -> dict[str, float]:
    """Median microseconds of each segment (of ``seams``) over the requests that have both its marks."""
    out: dict[str, float] = {}
    for label, start, stop in seams:
        spans = [(r[stop] - r[start]) / 1000 for r in requests if start in r and stop in r and r[stop] >= r[start]]
        if spans:
            out[label] = statistics.median(spans)
    return out


def read_marks(path: Path) -> list[tuple[str, int]]:
    marks: list[tuple[str, int]] = []
    for line in path.read_text().splitlines():
        kind, _, at = line.rpartition(" ")
        marks.append((kind, int(at)))
    return marks


def table(per_proxy: dict[str, dict[str, float]], client: dict[str, dict[str, float]]) -> list[str]:
    names = list(per_proxy)
    lines = [
        "| segment (median us) | " + " | ".join(names) + " |",
        "| --- |" + " --- |" * len(names),
    ]
    for label, _, _ in SEGMENTS:
        cells = [f"{per_proxy[n][label]:.1f}" if label in per_proxy[n] else "-" for n in names]
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    lines.append("")
    for name, figures in client.items():
        shown = ", ".join(f"{k} {v:.3f} ms" for k, v in figures.items())
        lines.append(f"- client, {name}: {shown}")
    return lines


async def _send(targets: dict[str, Target], body: bytes, rounds: int, n: int) -> dict[str, list[Timing]]:
    timings: dict[str, list[Timing]] = {name: [] for name in targets}
    for r in range(rounds):
        for name, got in (await interleaved(targets, body, n, seed=r)).items():
            bad = [t.status for t in got if t.status != 200]
            if bad:
                raise SystemExit(f"{name} answered {bad[0]}")
            timings[name] += got
    return timings


#: Tokens of history per row of the growing table.
GROWING_BUCKET = 50_000
#: The two seams the growing table compares, each side of the forward.
_GROWING_SEAMS = (SEGMENTS[0], SEGMENTS[-1])  # before the forward, in to end written


async def _send_growing(targets: dict[str, Target], n: int) -> list[tuple[str, int, float]]:
    """The growing session sent to every target (shuffled per request), every tenth body also 5 more times:
    per request to the gateway, its shape, its tokens and the client's added ms (gateway less direct)."""
    from benchmarks.growing_session import FIXED_REPEATS, growing_bodies  # reads the agent loops only when asked

    conns = {name: Connection(t) for name, t in targets.items()}
    sent: list[tuple[str, int, float]] = []
    try:
        for i, (tokens, body) in enumerate(growing_bodies(n, 13_000, 210_000)):
            for shape, repeats in (("growing", 1), ("fixed", FIXED_REPEATS if i % 10 == 0 else 0)):
                for r in range(repeats):
                    ends: dict[str, float] = {}
                    for name, target in shuffled(targets, i * 10 + r + (shape == "fixed")):
                        got = await conns[name].send(target.request_bytes(body))
                        if got.status != 200:
                            raise SystemExit(f"{name} answered {got.status}")
                        ends[name] = got.end
                    sent.append((shape, tokens, (ends["ventana"] - ends["direct"]) * 1000))
    finally:
        for conn in conns.values():
            await conn.close()
    return sent


def growing_table(found: Sequence[dict[str, int]], sent: Sequence[tuple[str, int, float]]) -> list[str]:
    """Per history bucket, growing against fixed: the gateway's before-the-forward and in-to-end medians (us),
    the client's added median (ms). ``found`` are the gateway's requests in the order ``sent`` lists them."""
    rows: dict[tuple[int, str], list[tuple[dict[str, int], float]]] = {}
    for marks, (shape, tokens, added) in zip(found, sent, strict=True):
        rows.setdefault((tokens // GROWING_BUCKET, shape), []).append((marks, added))
    lines = [
        "| history | n growing / fixed | before the forward us, growing / fixed "
        "| in to end written us, growing / fixed | client added ms, growing / fixed |",
        "| --- | --- | --- | --- | --- |",
    ]
    for bucket in sorted({b for b, _ in rows}):
        grown, fixed = rows.get((bucket, "growing"), []), rows.get((bucket, "fixed"), [])
        if not grown or not fixed:
            continue
        spans = [segments([m for m, _ in side], _GROWING_SEAMS) for side in (grown, fixed)]
        cells = [f"{spans[0][label]:.0f} / {spans[1][label]:.0f}" for label, _, _ in _GROWING_SEAMS]
        client = [statistics.median(ms for _, ms in side) for side in (grown, fixed)]
        low = bucket * GROWING_BUCKET // 1000
        lines.append(
            f"| {low}-{low + GROWING_BUCKET // 1000}K | {len(grown)} / {len(fixed)} | {cells[0]} | {cells[1]} "
            f"| {client[0]:.2f} / {client[1]:.2f} |"
        )
    return lines


def _marked(
    stack: ExitStack, tmp: Path, model: str, provider_ms: float = 0.0, config: dict[str, Any] | None = None
) -> tuple[SimHandle, GatewayHandle, Path]:
    """The simulator and a gateway serving ``model`` with the marks installed (the hooks put first on the
    children's path, then this checkout; a floor proxy started after finds them too), and the marks' folder."""
    hooks, marks = tmp / "hooks", tmp / "marks"
    hooks.mkdir()
    marks.mkdir()
    (hooks / "sitecustomize.py").write_text(_SITECUSTOMIZE)
    sim = stack.enter_context(run_simulator(tmp, record=False, cache=False, latency_ms=provider_ms))
    os.environ["PYTHONPATH"] = os.pathsep.join((str(hooks), str(REPO_ROOT)))
    os.environ[DIR_VARIABLE] = str(marks)
    models = [{"name": model, "litellm_model": f"openai/{model}", "api_base": sim.base_url}]
    return sim, stack.enter_context(run_gateway(tmp, {**(config or {}), "models": models})), marks


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--profile", default="stream", choices=("tiny", "agent14k", "agent105k", "stream"))
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--requests", type=int, default=100, help="per target and round")
    parser.add_argument("--skip", type=int, default=100, help="first requests of each proxy left out")
    parser.add_argument(
        "--provider-ms",
        type=float,
        default=0.0,
        help="the simulator waits this long before answering, as a provider across a network: the proxies' work "
        "in that wait is then off the client's time, as it is with a real provider",
    )
    parser.add_argument(
        "--growing",
        type=int,
        default=0,
        metavar="N",
        help="instead: N requests of a growing agent session (13K-210K tokens) against the fixed resend, per bucket",
    )
    parser.add_argument(
        "--neighbour",
        default="",
        metavar="litellm|burn=MS|sleep=MS",
        help="also send the profile, interleaved and unmarked, to LiteLLM's proxy or a slow floor proxy",
    )
    parser.add_argument(
        "--config",
        default="",
        help="config changes for the gateway, as benchmarks.overhead's --variant (e.g. store.writer=process)",
    )
    args = parser.parse_args()
    if args.growing:
        growing(args.growing)
        return
    profile = build_profiles((args.profile,))[0]
    with tempfile.TemporaryDirectory() as tmp_name, ExitStack() as stack:
        tmp = Path(tmp_name)
        sim, gw, marks = _marked(stack, tmp, MODEL, args.provider_ms, variant_config(args.config))
        floor = stack.enter_context(run_floor(tmp, sim.url))
        targets = {"direct": Target("direct", sim.base_url), "ventana": Target("ventana", gw.base_url)}
        targets["floor"] = Target("floor", floor)
        if args.neighbour:
            targets["neighbour"] = _neighbour(stack, tmp, sim, args.neighbour)
        timings = asyncio.run(_send(targets, profile.body, args.rounds, args.requests))
        stack.close()  # the proxies stop and write their marks
        timings.pop("neighbour", None)
        per_proxy: dict[str, dict[str, float]] = {}
        own: dict[str, float] = {}
        for path in sorted(marks.glob("timeline-*.txt")):
            found = [r for r in requests_of(read_marks(path)) if "forward" in r][args.skip :]
            if not found:
                continue  # the simulator: it forwards nothing
            name = "ventana" if path.stem == f"timeline-{gw.proc.pid}" else "floor"
            if name in per_proxy:  # a neighbour that marked too would pass for the floor
                raise SystemExit(f"more than one process forwarded with marks: {sorted(marks.iterdir())}")
            per_proxy[name] = segments(found)
            if name == "ventana":
                own = segments(found, GATEWAY_SEGMENTS)
    attrs = ("first", "end") if profile.stream else ("end",)
    client = {
        name: {a: statistics.median(getattr(t, a) for t in got[args.skip :]) * 1000 for a in attrs}
        for name, got in timings.items()
    }
    waited = f", the provider waiting {args.provider_ms:g} ms" if args.provider_ms else ""
    waited += f", beside {args.neighbour}" if args.neighbour else ""
    waited += f", the gateway with {args.config}" if args.config else ""
    print(f"profile {profile.name}, {args.rounds} rounds of {args.requests} requests per target, c=1{waited}")
    print("\n".join(table(dict(sorted(per_proxy.items(), reverse=True)), client)))
    print("\n| the gateway's own seams (median us) | ventana |\n| --- | --- |")
    print("\n".join(f"| {label} | {own[label]:.1f} |" for label, _, _ in GATEWAY_SEGMENTS if label in own))


def _neighbour(stack: ExitStack, tmp: Path, sim: SimHandle, spec: str) -> Target:
    """The unmarked fourth target: started without the marks' folder, so its process writes none."""
    marks_dir = os.environ.pop(DIR_VARIABLE)
    try:
        if spec == "litellm":
            url, _ = stack.enter_context(run_litellm(tmp, sim.base_url, MODEL))
            return Target("neighbour", url, api_key=MASTER_KEY)
        delay = neighbour_delay(spec)
        if delay is None:
            raise SystemExit(f"--neighbour takes litellm, burn=MS or sleep=MS, not {spec!r}")
        return Target("neighbour", stack.enter_context(run_floor(tmp, sim.url, **delay)))
    finally:
        os.environ[DIR_VARIABLE] = marks_dir


def growing(n: int) -> None:
    """``--growing``: the gateway alone beside direct (no floor), its marks split per request in sending order."""
    from benchmarks.growing_session import MODEL as GROWING_MODEL

    with tempfile.TemporaryDirectory() as tmp_name, ExitStack() as stack:
        sim, gw, marks = _marked(stack, Path(tmp_name), GROWING_MODEL)
        targets = {"direct": Target("direct", sim.base_url), "ventana": Target("ventana", gw.base_url)}
        sent = asyncio.run(_send_growing(targets, n))
        stack.close()  # the gateway stops and writes its marks
        found = [r for r in requests_of(read_marks(marks / f"timeline-{gw.proc.pid}.txt")) if "forward" in r]
    print(f"a growing session of {n} requests (13K-210K tokens), every tenth also resent 5 times; c=1")
    print("\n".join(growing_table(found[-len(sent) :], sent)))


if __name__ == "__main__":
    main()
