"""Benchmark the cache share of a long coding session with many tools: are compactions rare enough?

    python -m benchmarks.tool_session_cache                       # 60 requests, 30 tools, 32K window, LLM summariser
    python -m benchmarks.tool_session_cache --arms default,recall_off,recall_tool

The issue's check (summaries and recall): "a 60-request coding session (30 tools, 32K window,
LLM summariser): compactions rare enough that >= 0.9 of prompt tokens are read from the
simulator's cache over the session". A scripted client (seeded, deterministic) works on a
repository: every 5th request starts with a new instruction from the developer, every request
adds one tool round (a call to one of 30 coding tools and its result: a file listing, test output
or a diff of 400-800 tokens), so the history outgrows the window's 55 % threshold about a third of
the way in. Each request goes through a real ``ventana serve`` (openai SDK, HTTP) to the provider
simulator, whose OpenAI-style prefix cache reports ``cached_tokens``; the summariser is the
simulator's model too (``summarizer_model``). The share is cached / prompt tokens summed over the
session's requests as the client is billed (a served recall call's tokens included); the
summariser's own calls are reported beside it.
"""

from __future__ import annotations

import argparse
import random
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import openai
import orjson
from tqdm import tqdm

import gateway  # noqa: F401  (offline tiktoken)
from benchmarks.agent_loops import PRICE_CACHED, PRICE_INPUT, input_cost
from gateway.providersim.cache import PrefixCache, prompt_token_ids
from gateway.providersim.completion import is_summary_request
from gateway.tokens import counter_for
from tests.procs import run_gateway, run_simulator

COUNTER = counter_for("o200k_base")

WINDOW = 32_000
SYSTEM = (
    "You are a coding agent working in the repository at /repo (a Python package, `parser`). "
    "Use the tools to read, search, edit and test code. Make the smallest change that fixes the "
    "problem, keep the public API stable, and run the tests after every edit. Never commit "
    "secrets. Report what you changed and why, citing paths and line numbers."
)
_TOOL_SPECS = (
    ("read_file", "Read a file of the repository, optionally a line range"),
    ("write_file", "Write a whole file of the repository"),
    ("apply_patch", "Apply a unified diff to the repository"),
    ("list_dir", "List the entries of a directory"),
    ("grep", "Search file contents with a regular expression"),
    ("find_files", "Find files whose path matches a glob"),
    ("run_tests", "Run the test suite or a subset of it with pytest"),
    ("run_command", "Run a shell command in the repository"),
    ("git_status", "Show the working tree status"),
    ("git_diff", "Show the diff of the working tree or between commits"),
    ("git_log", "Show the commit history of a path"),
    ("git_blame", "Show who last changed each line of a file"),
    ("git_checkout", "Switch branches or restore files"),
    ("git_commit", "Record staged changes with a message"),
    ("lint", "Run the linter on files and report findings"),
    ("format_code", "Format files with the project formatter"),
    ("type_check", "Run the type checker on the package"),
    ("install_package", "Install a Python package into the environment"),
    ("open_issue", "Read an issue of the project tracker"),
    ("create_issue", "Open an issue in the project tracker."),
    ("search_docs", "Search the project documentation"),
    ("web_search", "Search the web for documentation or error messages"),
    ("fetch_url", "Fetch the text of a web page"),
    ("coverage_report", "Report test coverage per file"),
    ("profile_code", "Profile a command and report the slowest functions"),
    ("rename_symbol", "Rename a symbol across the repository"),
    ("outline_file", "List the classes and functions a file defines"),
    ("find_references", "Find every reference to a symbol"),
    ("create_branch", "Create a git branch from the current commit"),
    ("ask_user", "Ask the developer a question and wait for the answer"),
)
TOOLS: list[dict[str, Any]] = [
    {
        "type": "function",
        "function": {
            "name": name,
            "description": description,
            "parameters": {
                "type": "object",
                "properties": {
                    "path": {"type": "string", "description": "Path relative to /repo"},
                    "argument": {"type": "string", "description": "The pattern, command, range or text"},
                },
                "required": ["path"],
            },
        },
    }
    for name, description in _TOOL_SPECS
]
_INSTRUCTIONS = (
    "The tokenizer crashes on empty input in parser/lexer.py; find out why and fix it.",
    "Now add a regression test for the empty-input case in tests/test_lexer.py.",
    "The CI job `lint` fails on parser/ast.py; clean it up without changing behaviour.",
    "Profile parse_expression on the benchmark file and tell me the slowest function.",
    "Speed up the slowest function you found; keep the output identical.",
    "Issue 482 says nested comments are mis-parsed; reproduce it with a test first.",
    "Fix the nested comment bug and make the new test pass.",
    "Rename `Token.kind` to `Token.type_` everywhere, keeping a deprecated alias.",
    "Update the docs in docs/lexer.md for the rename and the empty-input fix.",
    "Run the whole suite and the type checker; fix anything that broke.",
    "please open a tracker issue describing the flaky test",
    "Summarise what changed today, with the paths and the test names.",
)
_WORDS = [
    "token",
    "lexer",
    "parser",
    "node",
    "span",
    "offset",
    "buffer",
    "stream",
    "cursor",
    "literal",
    "comment",
    "scope",
    "symbol",
]


def _result(rng: random.Random, step: int) -> str:
    """A tool result a coding agent would see: numbered source lines, test output or a diff."""
    kind = step % 3
    lines = []
    for n in range(rng.randint(25, 45)):
        a, b = rng.choice(_WORDS), rng.choice(_WORDS)
        if kind == 0:
            lines.append(f"{n + 1:4d}  def {a}_{b}_{rng.randint(10, 99)}(self, {b}: int) -> {a.title()}:  # {step}")
        elif kind == 1:
            verdict = "PASSED" if rng.random() > 0.15 else "FAILED"
            lines.append(f"tests/test_{a}.py::test_{b}_{rng.randint(100, 999)} {verdict} [{n * 2}%]")
        else:
            lines.append(f"{'+-'[n % 2]}    {a} = self.{b}[{rng.randint(0, 64)}]  # offset 0x{rng.getrandbits(24):06x}")
    return "\n".join(lines)


def coding_session(requests: int = 60, seed: int = 3) -> list[list[dict[str, Any]]]:
    """The messages each request adds to the history (a new instruction every 5th, one tool round each)."""
    rng = random.Random(seed)
    steps: list[list[dict[str, Any]]] = []
    for k in range(requests):
        step: list[dict[str, Any]] = []
        if k % 5 == 0:
            if k:
                step.append({"role": "assistant", "content": f"Done with step {k // 5}; the tests pass."})
            step.append({"role": "user", "content": _INSTRUCTIONS[(k // 5) % len(_INSTRUCTIONS)]})
        tool = TOOLS[rng.randrange(len(TOOLS))]["function"]["name"]
        call_id = f"call_{k:03d}"
        args = orjson.dumps({"path": f"parser/{rng.choice(_WORDS)}.py"}).decode()
        call = {"id": call_id, "type": "function", "function": {"name": tool, "arguments": args}}
        step.append({"role": "assistant", "content": None, "tool_calls": [call]})
        step.append({"role": "tool", "tool_call_id": call_id, "content": _result(rng, k)})
        steps.append(step)
    return steps


@dataclass
class Run:
    arm: str
    requests: int = 0
    prompt: int = 0
    cached: int = 0
    compactions: int = 0
    recalled: int = 0
    recall_calls: int = 0
    summarizer_calls: int = 0
    summarizer_prompt: int = 0
    all_prompt: int = 0  # every upstream call (summariser and served-tool rounds included)
    all_cached: int = 0
    described_offered: str = "-"  # the tool asked for by description, offered on the request that asks
    summarizer_cost: float = 0.0  # input cost of the summariser's calls at gpt-4o-mini's prices (cache 0.5)
    cost: float = 0.0  # input cost of every upstream call
    cost_direct: float = 0.0  # input cost of the client's own requests sent directly

    def row(self) -> str:
        share = self.cached / self.prompt if self.prompt else 0.0
        every = self.all_cached / self.all_prompt if self.all_prompt else 0.0
        return (
            f"| {self.arm} | {self.requests} | {self.compactions} | {self.prompt:,} | {self.cached:,} | "
            f"**{share:.3f}** | {every:.3f} | {self.described_offered} | {self.recalled} | {self.recall_calls} | "
            f"{self.summarizer_calls} ({self.summarizer_prompt:,} tokens sent) | ${self.summarizer_cost:.4f} | "
            f"{self.cost / max(1e-12, self.cost_direct):.3f} (${self.cost:.4f} / ${self.cost_direct:.4f}) |"
        )


#: The request that asks for a tool by its description (issue 34), and the tool it describes.
DESCRIBED_ASK, DESCRIBED_TOOL = "please open a tracker issue describing the flaky test", "create_issue"


ARMS: dict[str, dict[str, Any]] = {
    "default": {},
    "recall_off": {"memory": {"recall": False}},
    "recall_tool": {"memory": {"mode": "tool"}},
    "target_0.35": {"compaction": {"target": 0.35}},  # the default before session 33
}


def run_arm(arm: str, steps: list[list[dict[str, Any]]], tmp: Path) -> Run:
    out = Run(arm)
    with run_simulator(tmp / f"sim-{arm}") as sim:
        model = {"name": "coder", "litellm_model": "openai/gpt-4o-mini", "api_base": sim.base_url}
        arm_policy = ARMS[arm]
        policy = {**arm_policy, "compaction": {"summarizer_model": "coder", **arm_policy.get("compaction", {})}}
        config = {"models": [{**model, "context_window": WINDOW}], "policy": policy}
        with run_gateway(tmp / f"gw-{arm}", config) as gw:
            client = openai.OpenAI(base_url=gw.base_url, api_key="sk-bench", max_retries=0, timeout=120)
            history: list[dict[str, Any]] = [{"role": "system", "content": SYSTEM}]
            direct: list[tuple[list[dict[str, Any]], Any]] = []
            for step in tqdm(steps, desc=arm, leave=False):
                history += step
                direct.append((list(history), TOOLS))
                got = client.chat.completions.create(
                    model="coder", messages=history, tools=TOOLS, extra_headers={"x-session-id": f"code-{arm}"}
                )
                out.requests += 1
                if got.usage is not None:
                    out.prompt += got.usage.prompt_tokens
                    details = got.usage.prompt_tokens_details
                    out.cached += (details.cached_tokens or 0) if details else 0
        _read_simulator(out, sim.received())
    out.cost_direct = input_cost(direct)[0]
    return out


def _read_simulator(out: Run, received: list[dict[str, Any]]) -> None:
    heads: set[str] = set()
    cache = PrefixCache()
    for body in received:
        messages = body.get("messages") or []
        ids = prompt_token_ids(COUNTER, messages, body.get("tools"))
        cached = cache.lookup_and_store(ids)
        cost = (len(ids) - cached) * PRICE_INPUT + cached * PRICE_CACHED
        out.all_cached += cached
        out.all_prompt += len(ids)
        out.cost += cost
        users = [m for m in messages if m.get("role") == "user" and not str(m.get("content")).startswith("<")]
        if users and users[-1].get("content") == DESCRIBED_ASK and out.described_offered != "yes":
            names = {str((t.get("function") or {}).get("name")) for t in body.get("tools") or ()}
            out.described_offered = "yes" if DESCRIBED_TOOL in names else "no"
        if is_summary_request(messages):
            out.summarizer_calls += 1
            out.summarizer_prompt += COUNTER.messages(messages)
            out.summarizer_cost += cost
            continue
        for m in messages:
            content = str(m.get("content") or "")
            if content.startswith("<summary"):
                heads.add(content.split("\n", 1)[0])
            if m.get("role") == "user" and content.startswith("<recalled"):
                out.recalled += 1
        if messages and messages[-1].get("role") == "tool" and "<recalled" in str(messages[-1].get("content")):
            out.recall_calls += 1
    out.compactions = len(heads)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=60)
    parser.add_argument("--arms", default="default", help=f"comma-separated: {', '.join(ARMS)}")
    args = parser.parse_args()
    steps = coding_session(args.requests)
    print(
        "| arm | requests | compactions | prompt tokens | cached | cached share | cached share, every upstream call "
        "| create_issue offered when asked | requests with <recalled> | recall calls served | summariser calls "
        "| summariser input cost | cost via Ventana / direct (every upstream call) |"
    )
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    with tempfile.TemporaryDirectory() as tmp:
        for arm in args.arms.split(","):
            for sub in ("sim-" + arm, "gw-" + arm):
                (Path(tmp) / sub).mkdir(parents=True, exist_ok=True)
            print(run_arm(arm, steps, Path(tmp)).row(), flush=True)


if __name__ == "__main__":
    main()
