"""Benchmark tool pruning on public data: recall, tokens removed, added latency, cache trade-off.

Run from the repo root: ``python -m benchmarks.tool_pruning`` (``--quick`` for a sample,
``--scorers bm25,embedding``). Prints markdown tables for ``benchmarks/RESULTS.md``.

- Recall: share of needed tools (``expected_functions``; ToolBench: the tools the next
  assistant message called) that are in the kept set, over every case with at least
  ``min_offered`` tools (smaller requests are not pruned and would inflate it).
- Tokens removed: ``1 - tool tokens forwarded / tool tokens offered`` over those cases.
- Latency: median time of ``assemble`` with the pass on, minus the median with every pass
  off, over the same requests in the same run (warm caches, as in a long-running server).
- Cache trade-off: MetaTool sessions (and ToolBench runs) replayed turn by turn through
  ``providersim.cache.PrefixCache`` (OpenAI's documented accounting: exact prefix, 1024-token
  minimum, 128-token steps) for: no pruning, sticky pruning, pruning without stickiness,
  ``allowed_tools`` and ``defer_loading``.
- ``--profiles-from tune``: tool usage profiles (``tool_scoring.usage_profiles``) learned from
  MetaTool's tuning half, its queries standing for turns after which the model called their
  needed tools. A held-out case sees the profiles of every tuning case; a tuning case those of
  the tuning cases of *other* needed-tool sets (leave one group out), so no query, nor one of
  its rewordings, ever profiles itself. Other sets get no profiles.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import gateway  # noqa: F401  (offline tokenizer files)
from benchmarks.tool_cases import (
    SPLITS,
    ToolCase,
    metatool_sessions,
    selection_cases,
    split_cases,
    toolbench_cases,
    toolbench_runs,
)
from gateway.assembly.context import Context, Env, SessionState
from gateway.assembly.pipeline import assemble
from gateway.assembly.policy import Policy
from gateway.assembly.prune_tools import ToolPolicy
from gateway.assembly.tool_scoring import query_text, tool_name
from gateway.assembly.tool_scoring.usage_profiles import UsageProfiles, tool_keys
from gateway.memos import Memos
from gateway.providersim.cache import PrefixCache, prompt_token_ids
from gateway.tokens import counter_for

COUNTER = counter_for("o200k_base")
MEMOS = Memos()  # the gateway's caches between requests (api.deps.Gateway.memos)


def progress(items: Sequence[Any], label: str) -> Any:
    from rich.progress import track

    return track(items, description=label, transient=True)


Profiles = Mapping[str, Any]  # a UsageProfiles snapshot: tool key -> unit vector


def context(case: ToolCase, state: SessionState, provider: str = "openai", profiles: Profiles | None = None) -> Context:
    env = Env(counter=COUNTER, context_window=128_000, model="gpt-4o-mini", provider=provider, memos=MEMOS)
    if profiles:
        env = replace(env, tool_profiles=profiles)
    params = {"model": "gpt-4o-mini"}
    return Context(tuple(case.messages), tuple(case.tools), params, env, state)


def kept_names(ctx: Context) -> set[str]:
    """Tools the model can call without a search: forwarded, not deferred, and allowed."""
    choice = ctx.params.get("tool_choice")
    if isinstance(choice, dict) and choice.get("type") == "allowed_tools":
        return {t["function"]["name"] for t in choice["allowed_tools"]["tools"]}
    return {tool_name(t) for t in ctx.tools or () if not t.get("defer_loading")}


def prompt_tools(ctx: Context) -> list[Any]:
    """The tools that occupy the prompt (deferred ones and the server-side search tool do not)."""
    return [t for t in ctx.tools or () if "function" in t and not t.get("defer_loading")]


@dataclass
class Selection:
    cases: int = 0
    needed: int = 0
    found: int = 0
    tokens_offered: int = 0
    tokens_kept: int = 0

    def add(self, case: ToolCase, out: Context) -> None:
        self.cases += 1
        kept = kept_names(out)
        self.needed += len(case.expected)
        self.found += len(case.expected & kept)
        self.tokens_offered += COUNTER.tools(case.tools)
        self.tokens_kept += COUNTER.tools(prompt_tools(out))

    def row(self, label: str) -> str:
        recall = self.found / max(self.needed, 1)
        removed = 1 - self.tokens_kept / max(self.tokens_offered, 1)
        return f"| {label} | {self.cases} | {recall:.4f} | {removed:.1%} |"


_turn_vectors: dict[str, Any] = {}


def observed_profiles(cases: Sequence[ToolCase]) -> UsageProfiles:
    """Profiles as the gateway would learn them had the model called each case's needed tools."""
    from gateway.assembly.tool_scoring.embedding import query_vector

    profiles = UsageProfiles()
    for case in cases:
        keys = tool_keys(case.tools)
        if case.id not in _turn_vectors:
            _turn_vectors[case.id] = query_vector(query_text(case.messages))
        profiles.observe([keys[n] for n in sorted(case.expected) if n in keys], _turn_vectors[case.id])
    return profiles


def profiles_by_case(cases: list[ToolCase]) -> dict[str, Profiles]:
    """Each case's profiles learned from the tuning half, never from its own needed-tool group."""
    tune = split_cases(cases, "tune")
    every = observed_profiles(tune).snapshot()
    out = {c.id: every for c in split_cases(cases, "heldout")}
    for group in dict.fromkeys(c.expected for c in tune):
        others = observed_profiles([c for c in tune if c.expected != group]).snapshot()
        out.update({c.id: others for c in tune if c.expected == group})
    return out


def selection_table(
    policy: Policy,
    sets: dict[str, list[ToolCase]],
    label: str,
    profiles: Mapping[str, Mapping[str, Profiles]] | None = None,
) -> list[str]:
    lines = []
    for name, cases in sets.items():
        stats = Selection()
        by_case = (profiles or {}).get(name, {})
        for case in progress(cases, f"{label} {name}"):
            if len(case.tools) < policy.tools.min_offered:
                continue
            out = assemble(context(case, SessionState("bench"), profiles=by_case.get(case.id)), policy).assembled
            stats.add(case, out)
        lines.append(stats.row(f"{label} / {name}"))
    return lines


def latency_ms(
    policy: Policy, cases: Sequence[ToolCase], repeats: int, profiles: Profiles | None = None
) -> tuple[float, float]:
    """Median ms per request with the pass, and with every pass off, interleaved in one run."""
    off = policy.all_disabled()
    on_times: list[float] = []
    off_times: list[float] = []
    for case in cases[:5]:
        assemble(context(case, SessionState("warm"), profiles=profiles), policy)  # load models, fill memo caches
    for _ in progress(range(repeats), "latency"):
        for case in cases:
            for pol, out in ((policy, on_times), (off, off_times)):
                ctx = context(case, SessionState("lat"), profiles=profiles)
                t0 = time.perf_counter()
                assemble(ctx, pol)
                out.append((time.perf_counter() - t0) * 1000)
    return statistics.median(on_times), statistics.median(off_times)


@dataclass
class Replay:
    turns: int = 0
    prompt: int = 0
    cached: int = 0
    needed: int = 0
    found: int = 0
    set_changes: int = 0

    def row(self, label: str) -> str:
        full = self.prompt - self.cached
        recall = self.found / max(self.needed, 1)
        return (
            f"| {label} | {self.turns} | {self.prompt:,} | {full:,} | {self.cached:,} | "
            f"{self.cached / max(self.prompt, 1):.1%} | {recall:.4f} | {self.set_changes} |"
        )


def replay(sessions: list[list[ToolCase]], policy: Policy, provider: str = "openai") -> Replay:
    """Send every session turn by turn through the pipeline and one prefix cache."""
    cache = PrefixCache()
    out = Replay()
    for n, session in enumerate(sessions):
        state = SessionState(f"replay{n}")
        for case in session:
            asm = assemble(context(case, state, provider), policy)
            state = asm.assembled.session
            ids = prompt_token_ids(COUNTER, case.messages, prompt_tools(asm.assembled) or None)
            out.turns += 1
            out.prompt += len(ids)
            out.cached += cache.lookup_and_store(ids)
            out.needed += len(case.expected)
            out.found += len(case.expected & kept_names(asm.assembled))
        out.set_changes += state.tool_set_changes
    return out


def replay_table(sessions: list[list[ToolCase]], tools: ToolPolicy, label: str) -> list[str]:
    none = Policy().all_disabled()
    variants: list[tuple[str, Policy, str]] = [
        ("no pruning", none, "openai"),
        ("prune, sticky", Policy(tools=tools), "openai"),
        ("prune, not sticky", Policy(tools=tools.model_copy(update={"sticky": False})), "openai"),
        ("allowed_tools (OpenAI)", Policy(tools=tools.model_copy(update={"mode": "allowed_tools"})), "openai"),
        ("defer_loading (Anthropic)", Policy(tools=tools.model_copy(update={"mode": "defer_loading"})), "anthropic"),
    ]
    return [replay(sessions, pol, provider).row(f"{label}: {name}") for name, pol, provider in variants]


REPLAY_HEADER = (
    "\n| replay: mode | turns | prompt tokens | billed full price | read from cache | cached | recall | set changes |"
    "\n| --- | --- | --- | --- | --- | --- | --- | --- |"
)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a sample of each set")
    parser.add_argument("--scorers", default="bm25,embedding", help="comma list, e.g. bm25,embedding_sentences")
    parser.add_argument("--sessions", type=int, default=30)
    parser.add_argument("--turns", type=int, default=8)
    parser.add_argument("--max-tools", type=int, default=None, help="override ToolPolicy.max_tools")
    parser.add_argument("--grow-top", type=int, default=None, help="override ToolPolicy.grow_top")
    parser.add_argument("--grow-ratio", type=float, default=None, help="override ToolPolicy.grow_ratio")
    parser.add_argument("--pinned", default="", help="comma list of tools always kept (ToolPolicy.pinned)")
    parser.add_argument("--sets", default="bfcl,metatool 47,metatool 199,toolbench", help="selection sets to run")
    parser.add_argument("--replays", default="metatool,toolbench", help="session replays to run")
    parser.add_argument(
        "--split", default="all", choices=SPLITS, help="MetaTool cases: the tuning or the held-out half (tool_cases)"
    )
    parser.add_argument("--budget-share", type=float, default=None, help="override ToolPolicy.budget_share")
    parser.add_argument("--budget-tokens", type=int, default=None, help="override ToolPolicy.budget_tokens")
    parser.add_argument("--min-offered", type=int, default=None, help="override ToolPolicy.min_offered")
    parser.add_argument("--skip", default="", help="comma list of parts to skip: selection,latency,replay")
    parser.add_argument("--usage-weight", type=float, default=None, help="override ToolPolicy.usage_weight")
    parser.add_argument(
        "--profiles-from",
        default="none",
        choices=("none", "tune"),
        help="MetaTool: learn tool usage profiles from the tuning half (leave one needed-tool group out)",
    )
    args = parser.parse_args(argv)
    overrides: dict[str, Any] = {
        k: v
        for k, v in (
            ("max_tools", args.max_tools),
            ("grow_top", args.grow_top),
            ("grow_ratio", args.grow_ratio),
            ("budget_share", args.budget_share),
            ("budget_tokens", args.budget_tokens),
            ("min_offered", args.min_offered),
            ("usage_weight", args.usage_weight),
        )
        if v is not None
    }
    if args.pinned:
        overrides["pinned"] = tuple(args.pinned.split(","))
    skip = set(args.skip.split(","))
    step = 7 if args.quick else 1
    metatool = {n: [c for c in selection_cases("metatool.jsonl") if len(c.tools) == n] for n in (47, 199)}
    sets = {
        "bfcl": selection_cases("bfcl.jsonl")[::step],
        "metatool 47": split_cases(metatool[47], args.split)[::step],
        "metatool 199": split_cases(metatool[199], args.split)[::step],
        "toolbench": toolbench_cases(),
    }
    sets = {k: v for k, v in sets.items() if k in args.sets.split(",")}
    profiles: dict[str, dict[str, Profiles]] = {}
    latency_profiles: Profiles | None = None
    if args.profiles_from == "tune":
        profiles = {f"metatool {n}": profiles_by_case(metatool[n]) for n in (47, 199) if f"metatool {n}" in sets}
        if "latency" not in skip:
            latency_profiles = observed_profiles(split_cases(metatool[47], "tune")).snapshot()
    scorers = [s for s in args.scorers.split(",") if s]
    policies = {s: Policy(tools=ToolPolicy(scorer=s, **overrides)) for s in scorers}  # type: ignore[arg-type]
    print(f"tool policy: {ToolPolicy(**overrides)!r}\n")
    if "selection" not in skip:
        print("| scorer / set | cases pruned | recall | tool tokens removed |\n| --- | --- | --- | --- |")
        for scorer, policy in policies.items():
            print("\n".join(selection_table(policy, sets, scorer, profiles)))
    if "latency" not in skip:
        print("\n| scorer | median ms with pass | median ms all passes off | added ms |\n| --- | --- | --- | --- |")
        pool = [c for c in selection_cases("metatool.jsonl") if len(c.tools) == 47]
        sample = pool[:: max(1, len(pool) // 60)]
        for scorer, policy in policies.items():
            on, off = latency_ms(policy, sample, 3 if args.quick else 10, latency_profiles)
            print(f"| {scorer} (metatool 47, {len(sample)} requests) | {on:.3f} | {off:.3f} | {on - off:.3f} |")
    if "replay" not in skip:
        print(REPLAY_HEADER)
        replays = {
            "metatool": lambda: metatool_sessions(args.sessions // (3 if args.quick else 1), args.turns),
            "toolbench": toolbench_runs,
        }
        for scorer, policy in policies.items():
            for name in args.replays.split(","):
                print("\n".join(replay_table(replays[name](), policy.tools, f"{name} sessions, {scorer}")))


if __name__ == "__main__":
    main()
