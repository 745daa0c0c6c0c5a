"""Per-turn cost of assembly across a 300-turn agent session: it should follow what is new, not the history.

    python -m benchmarks.turn_cost [--turns 300]

Replays a growing agent conversation built from the real ToolBench runs: each turn adds
one assistant tool call and its result (real ones, cycled), and the client resends the
whole history, as OpenAI clients do. For every turn it does in process what the gateway
does to a request besides HTTP, on the request's bytes: parse (reusing last turn's
history, as ``api.incremental_parse`` does) and validate, name the session, recognise the
resent history, count new text, build the Context, run the default pipeline and count the
prompt, carrying the session state from turn to turn.
Printed per turn band: the median time of that work, the new tokens per turn, and the
same work with a counter that has seen nothing (what a gateway without the per-text
memo pays every turn). Times are the thread's CPU time (``time.thread_time``): on a
shared 2-core machine wall time mostly measures when the scheduler ran something else.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from dataclasses import replace
from typing import Any

import orjson
from tqdm import tqdm

import gateway  # noqa: F401  (offline tiktoken)
from benchmarks.profiles import MODEL, TOOLBENCH, _renumbered, _runs, _steps, _tools
from gateway.api.chat import build_context, parse_request
from gateway.api.deps import Gateway
from gateway.api.validate import validate_chat_request
from gateway.assembly.budget_report import budget_report
from gateway.assembly.context import SessionState
from gateway.assembly.pipeline import FORWARD_PASSES, assemble, lint_findings
from gateway.assembly.prefix import track_prefix
from gateway.config import ModelConfig, Settings
from gateway.edges.edges import Edges
from gateway.edges.token_offload import OFFLOAD_BODY_BYTES, _growth
from gateway.sessions.identify import identify_session
from gateway.sessions.memory import MemorySessionStore
from gateway.store.record import MemoryRecorder
from gateway.tokens import TokenCounter
from gateway.upstream.router import UpstreamRouter

BANDS = ((1, 10), (50, 60), (100, 110), (150, 160), (200, 210), (250, 260), (290, 300))


def _gateway() -> tuple[Gateway, ModelConfig]:
    model = ModelConfig(name=MODEL, litellm_model=f"openai/{MODEL}", api_base="http://127.0.0.1:9/v1")
    settings = Settings(models=(model,))
    sessions = MemorySessionStore()
    edges = Edges.build(settings, sessions, stored=False)
    gw = Gateway(settings, UpstreamRouter(settings.upstream), sessions, MemoryRecorder(), edges)
    return gw, model


def one_turn(raw: bytes, gw: Gateway, model: ModelConfig, state: SessionState) -> tuple[float, SessionState, int]:
    """The gateway's non-HTTP work on one request: (seconds, next state, prompt tokens)."""
    started = time.thread_time()
    body, reused = parse_request(raw, gw.parser, "anonymous")
    validate_chat_request(body, max_messages=5_000, known_valid=reused)
    gw.parser.remember(raw, "anonymous", body, reused)
    session_id = identify_session(None, "anonymous", model.name, body["messages"])
    gw.resent.adopt(session_id, body, len(raw), known=reused)
    counter = gw.counter(model)
    if len(raw) >= OFFLOAD_BODY_BYTES and _growth("turn-cost", len(raw)) >= OFFLOAD_BODY_BYTES:
        counter.learn(counter.missing(body["messages"], body.get("tools")))  # the gateway's off-loop path
    ctx = build_context(body, gw, model, state, "anonymous")
    assembly = assemble(ctx, gw.settings.policy, FORWARD_PASSES)
    prefix = track_prefix(assembly.assembled)
    # After the answer, as ``chat.count_tokens`` does: both counts, the budget report, lint.
    ctx.prompt_tokens()
    tokens = assembly.assembled.prompt_tokens()
    budget_report(assembly.assembled)
    lint_findings(assembly.assembled, gw.settings.policy)
    elapsed = time.thread_time() - started
    return elapsed, replace(assembly.assembled.session, turn=state.turn + 1, previous_prefix=prefix.keys()), tokens


def cold_count(raw: bytes) -> float:
    """Counting the same request with a counter that has seen nothing (no memo)."""
    started = time.thread_time()
    body = orjson.loads(raw)
    TokenCounter("o200k_base").request(body["messages"], body.get("tools"))
    return time.thread_time() - started


def series(turns: int, cold_every: int, progress: bool = True) -> list[tuple[int, float, int, int, float | None]]:
    """One session of ``turns`` turns in this process: (turn, CPU s, prompt tokens, new tokens, no-memo s)."""
    runs = _runs(TOOLBENCH)
    tools, steps = _tools(runs), _steps(runs)
    first = runs[0]["messages"]
    history: list[dict[str, Any]] = [dict(first[0]), dict(first[1])]
    gw, model = _gateway()
    state = SessionState(session_id="turn-cost")
    rows: list[tuple[int, float, int, int, float | None]] = []
    previous_tokens = 0
    for turn in tqdm(range(1, turns + 1), desc="turns", unit="turn", disable=not progress):
        history += _renumbered(steps[(turn - 1) % len(steps)], turn)
        raw = orjson.dumps({"model": MODEL, "messages": history, "tools": tools})
        elapsed, state, tokens = one_turn(raw, gw, model, state)
        cold = cold_count(raw) if turn % cold_every == 0 or turn == 1 else None
        rows.append((turn, elapsed, tokens, tokens - previous_tokens, cold))
        previous_tokens = tokens
    return rows


def _repeated(args: argparse.Namespace) -> list[tuple[int, float, int, int, float | None]]:
    """Per turn, the median over ``--repeat`` sessions, each in a fresh process (no memo carried over)."""
    command = [sys.executable, "-m", "benchmarks.turn_cost", "--turns", str(args.turns)]
    command += ["--cold-every", str(args.cold_every), "--emit-json"]
    runs = []
    for _ in tqdm(range(args.repeat), desc="sessions", unit="session"):
        out = subprocess.run(command, check=True, capture_output=True).stdout
        runs.append(orjson.loads(out))
    rows = []
    for turn_rows in zip(*runs, strict=True):
        colds = [r[4] for r in turn_rows if r[4] is not None]
        first = turn_rows[0]
        rows.append(
            (first[0], statistics.median(r[1] for r in turn_rows), first[2], first[3], min(colds) if colds else None)
        )
    return rows


def slope_us_per_message(rows: list[tuple[int, float, int, int, float | None]], from_turn: int = 20) -> float:
    """Least-squares growth of the per-turn time with the history (2 messages a turn), in us per message."""
    points = [(2 + 2 * r[0], r[1] * 1e6) for r in rows if r[0] >= from_turn]
    return statistics.linear_regression([p[0] for p in points], [p[1] for p in points]).slope


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--turns", type=int, default=300)
    parser.add_argument("--cold-every", type=int, default=10, help="measure the no-memo count every N turns")
    parser.add_argument("--repeat", type=int, default=3, help="sessions, each in a fresh process; median per turn")
    parser.add_argument("--emit-json", action="store_true", help=argparse.SUPPRESS)  # one session's rows, for --repeat
    args = parser.parse_args()
    if args.emit_json:
        sys.stdout.buffer.write(orjson.dumps(series(args.turns, args.cold_every, progress=False)))
        return
    rows = _repeated(args) if args.repeat > 1 else series(args.turns, args.cold_every)
    print("| turns | messages | prompt tokens | new tokens/turn | gateway work p50 ms (CPU) | no-memo count ms (CPU) |")
    print("| --- | --- | --- | --- | --- | --- |")
    for lo, hi in BANDS:
        band = [r for r in rows if lo <= r[0] <= hi]
        if not band:
            continue
        colds = [r[4] for r in band if r[4] is not None]
        print(
            f"| {lo}-{hi} | {2 + 2 * hi} | {band[-1][2]} | {statistics.median(r[3] for r in band):.0f} "
            f"| {statistics.median(r[1] for r in band) * 1000:.3f} "
            f"| {statistics.median(colds) * 1000 if colds else float('nan'):.2f} |"
        )
    if len(rows) > 40:
        print(f"\ngrowth with the history: {slope_us_per_message(rows):.3f} us per message of history (turns 20+)")


if __name__ == "__main__":
    main()
