"""Where a request's CPU goes inside the gateway, stage by stage and pass by pass, without HTTP.

    python -m benchmarks.stage_costs [--profiles agent14k,agent105k] [--requests 100]

For each profile body (``benchmarks/profiles.py``) it repeats, in process and on freshly
parsed JSON as a request would arrive, what ``api/chat.py`` does to a request: parse,
validate, name the session, build the Context, run every pass of the default pipeline
(timed one by one), track the prefix, encode the body for the provider, then the bookkeeping
done after the answer (counts, budget report, metrics) and the rows the store writer builds.
The session state is carried from request to request, as the same conversation resent.
Prints the median of each stage (the first quarter of requests, cold caches, left out).
Run it from two checkouts (``PYTHONPATH=<other checkout> python -m benchmarks.stage_costs``)
to compare them on the same machine minutes apart.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable
from typing import Any, TypeVar

import orjson

import gateway  # noqa: F401  (offline tiktoken)
from benchmarks.profiles import MODEL, build_profiles, fresh
from gateway import metrics
from gateway.api.chat import forward_body, parse_request
from gateway.api.incremental_parse import IncrementalParser
from gateway.api.validate import validate_chat_request
from gateway.assembly.budget_report import budget_report
from gateway.assembly.context import Context, Decision, Env, SessionState
from gateway.assembly.pipeline import FORWARD_PASSES, Assembly, lint_findings
from gateway.assembly.prefix import track_prefix
from gateway.assembly.request import context_from_body
from gateway.assembly.verify_assembly import verify_assembly
from gateway.config import load_settings
from gateway.memos import Memos
from gateway.sessions.identify import identify_session
from gateway.sessions.resent import ResentHistory
from gateway.store import writer
from gateway.store.record import RequestRecord
from gateway.tokens import counter_for

T = TypeVar("T")
#: The process-wide state chat.py's request path keeps between requests.
RESENT = ResentHistory()
PARSER = IncrementalParser()
KNOWN = writer.KnownContent()
MEMOS = Memos()  # the gateway's caches between requests (api.deps.Gateway.memos)


class Stages:
    def __init__(self) -> None:
        self.times: dict[str, list[float]] = {}

    def time(self, name: str, step: Callable[[], T]) -> T:
        started = time.perf_counter()
        out = step()
        self.times.setdefault(name, []).append((time.perf_counter() - started) * 1e6)
        return out


def _assemble(stages: Stages, ctx: Context, policy: Any) -> Assembly:
    current, decisions = ctx, []
    for spec in FORWARD_PASSES:  # lint runs after the answer (warn mode, the default), as in api/chat.py
        pass_policy = spec.policy(policy)
        if not pass_policy.enabled:
            continue
        run = spec.run
        current, made = stages.time(f"  pass {spec.name}", lambda r=run, p=pass_policy, c=current: r(c, p))
        decisions.extend(made)
    final = current
    problems = stages.time("  verify_assembly", lambda: [] if final is ctx else verify_assembly(ctx, final, decisions))
    return Assembly(ctx, ctx if problems else final, tuple(decisions))


def one_request(stages: Stages, raw: bytes, policy: Any, state: SessionState, i: int) -> SessionState:
    body, reused = stages.time("parse", lambda: parse_request(raw, PARSER, "anonymous"))
    stages.time("validate", lambda: validate_chat_request(body, max_messages=5_000, known_valid=reused))
    stages.time("remember bytes", lambda: PARSER.remember(raw, "anonymous", body, reused))
    session_id = stages.time("session id", lambda: identify_session(None, "anonymous", MODEL, body["messages"]))
    stages.time("resent history", lambda: RESENT.adopt(session_id, body, len(raw), known=reused))
    counter = counter_for("o200k_base")
    counter = counter.for_request() if hasattr(counter, "for_request") else counter
    env = Env(counter=counter, context_window=128_000, model=MODEL, provider="openai", now=time.time(), memos=MEMOS)
    ctx = stages.time("context", lambda: context_from_body(body, env, state))
    assembly = _assemble(stages, ctx, policy)
    prefix = stages.time("track_prefix", lambda: track_prefix(assembly.assembled))
    outgoing = forward_body(body, assembly)
    stages.time("encode for provider", lambda: orjson.dumps(outgoing))
    record = RequestRecord.of(
        request_id=f"req-{i}",
        session_id=session_id,
        created_at=time.time(),
        model=MODEL,
        provider="openai",
        caller="anonymous",
        original=body,
        assembled=outgoing,
        decisions=[d.to_dict() for d in assembly.decisions if isinstance(d, Decision)],
    )
    stages.time("after: counts", lambda: (ctx.prompt_tokens(), assembly.assembled.prompt_tokens()))
    stages.time("after: budget report", lambda: budget_report(assembly.assembled))
    stages.time("after: lint", lambda: lint_findings(assembly.assembled, policy))
    stages.time("after: metrics", lambda: metrics.observe(record))
    batch = writer._Batch(known=KNOWN)
    stages.time("writer thread: rows", lambda: writer._request_row(batch, record, time.time()))
    KNOWN.update([*batch.blobs, *batch.nodes])  # as the writer does once the batch has committed
    return assembly.assembled.session if prefix is not None else state


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--profiles", default="agent14k,agent105k")
    parser.add_argument("--requests", type=int, default=100)
    parser.add_argument(
        "--fresh",
        action="store_true",
        help="every request a first turn with every text new (its tokens counted beforehand, untimed, "
        "as the gateway counts big new text in a worker thread)",
    )
    args = parser.parse_args()
    policy = load_settings().policy
    for profile in build_profiles(tuple(args.profiles.split(","))):
        stages, state = Stages(), SessionState(session_id="stage-costs")
        for i in range(args.requests):
            raw = profile.body
            if args.fresh:
                raw, state = fresh(raw, i), SessionState(session_id=f"stage-costs-{i}")
                data = orjson.loads(raw)
                counter = counter_for("o200k_base")
                counter.learn(counter.missing(data["messages"], data.get("tools")))
            state = one_request(stages, raw, policy, state, i)
        skip = args.requests // 4
        medians = {name: statistics.median(values[skip:]) for name, values in stages.times.items()}
        request_path = sum(v for k, v in medians.items() if not k.startswith(("after", "writer")))
        size = f"{profile.messages} messages, {profile.tokens} tokens"
        print(f"\n{profile.name} ({size}), median us of {args.requests - skip} requests:")
        print("| stage | median us |\n| --- | --- |")
        for name, value in medians.items():
            print(f"| {name} | {value:.1f} |")
        print(f"| **before forwarding (parse .. encode)** | **{request_path:.1f}** |")


if __name__ == "__main__":
    main()
