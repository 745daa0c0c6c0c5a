"""The inspector over real traffic, one row per data file: page times, sizes, and what the pages say.

    python -m benchmarks.ui_pages [--runs 2] [--max-turns 40] [--repeats 3] [--model small-window]

For every file in ``shared/data`` (agent loops, long conversations, BFCL, ToolBench, MetaTool)
the first ``--runs`` conversations are sent turn by turn, as a client resends its history
(``replay.transcripts.read_transcripts``), through a real gateway process to the provider
simulator, each conversation its own session. Then, over real HTTP with the admin key, the
median of ``--repeats`` fetches of: the sessions list filtered to that file, the session page
of its longest session, and the request page of that session's last turn. The row also says
what the pages show: compactions in the list against the turns the session pages badge
(equal when a compaction is counted once), turns badged "summary reused", and the share of
request pages whose "what changed" list names at least one change.
"""

from __future__ import annotations

import argparse
import re
import statistics
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import httpx
from tqdm import tqdm

import gateway  # noqa: F401  (offline tiktoken)
from gateway.api.auth import hash_key
from gateway.replay.transcripts import Conversation, read_transcripts
from tests.procs import GatewayHandle, run_gateway, run_simulator, sim_models
from tests.shared_data import DATA_FILES, data_path, need

ADMIN = "vk-ui-bench"
FILES = DATA_FILES


@dataclass(frozen=True, slots=True)
class Row:
    file: str
    sessions: int
    turns: int
    errors: int
    list_ms: float
    list_kib: float
    session_ms: float
    session_kib: float
    session_turns: int
    request_ms: float
    request_kib: float
    compactions_listed: int
    compactions_badged: int
    summary_reused: int
    changes_named: float


def _tag(name: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", Path(name).stem.lower())


def _send(gw: GatewayHandle, tag: str, conversations: Sequence[Conversation], bar: tqdm) -> tuple[int, int]:
    turns = errors = 0
    with httpx.Client(base_url=gw.base_url, timeout=120) as client:
        for i, conv in enumerate(conversations):
            for body in conv.requests:
                reply = client.post("/chat/completions", json=body, headers={"X-Session-Id": f"{tag}-{i}"})
                turns += 1
                errors += reply.status_code >= 400
                bar.update()
    return turns, errors


def _median_get(client: httpx.Client, path: str, repeats: int) -> tuple[float, str]:
    times, text = [], ""
    for _ in range(repeats):
        started = time.perf_counter()
        response = client.get(path)
        times.append((time.perf_counter() - started) * 1000)
        response.raise_for_status()
        text = response.text
    return statistics.median(times), text


def _measure(gw: GatewayHandle, name: str, sessions: int, turns: int, errors: int, repeats: int) -> Row:
    tag = _tag(name)
    headers = {"authorization": f"Bearer {ADMIN}"}
    with httpx.Client(base_url=gw.url, headers=headers, timeout=120) as client:
        time.sleep(1.0)  # the store writer batches; let it land
        list_ms, listing = _median_get(client, f"/ui?q={tag}-&per=500", repeats)
        listed = sum(int(n) for n in re.findall(r'<td class="num compactions">(\d+)</td>', listing))
        badged = reused = named = pages = 0
        longest = (0, "", "")
        for i in range(sessions):
            page = client.get(f"/ui/sessions/{tag}-{i}")
            if page.status_code != 200:
                tqdm.write(f"{name}: session {tag}-{i} -> {page.status_code}")
                continue
            rows = page.text.count('class="turn-row')
            badged += page.text.count('class="badge compaction"')
            reused += page.text.count('class="badge reused"')
            last = re.findall(r'<a href="/ui/requests/(req-[0-9a-f]+)">', page.text)[-1]
            request = client.get(f"/ui/requests/{last}").text
            pages += 1
            named += '<ul class="changes" id="changes">' in request
            if rows > longest[0]:
                longest = (rows, f"/ui/sessions/{tag}-{i}", f"/ui/requests/{last}")
        if not longest[1]:  # every turn refused before forwarding (too long for the window): nothing to show
            nan = float("nan")
            return Row(name, sessions, turns, errors, list_ms, len(listing) / 1024, nan, 0, 0, nan, 0, 0, 0, 0, 0)
        session_ms, session_html = _median_get(client, longest[1], repeats)
        request_ms, request_html = _median_get(client, longest[2], repeats)
    return Row(
        name,
        sessions,
        turns,
        errors,
        list_ms,
        len(listing) / 1024,
        session_ms,
        len(session_html) / 1024,
        longest[0],
        request_ms,
        len(request_html) / 1024,
        listed,
        badged,
        reused,
        named / pages if pages else 0.0,
    )


def _models(base_url: str) -> list[dict[str, object]]:
    """The simulator's models plus a 32K window: agent loops carry 10K tokens of tools and outgrow 8K at once."""
    window = {
        "name": "window-32k",
        "litellm_model": "openai/gpt-4o-mini",
        "api_base": base_url,
        "context_window": 32_000,
    }
    return [*sim_models(base_url), window]


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=2, help="conversations per data file")
    parser.add_argument("--max-turns", type=int, default=40, help="turns per conversation, at most")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument(
        "--model", default="window-32k", choices=[m["name"] for m in _models("")], help="the model's context window"
    )
    args = parser.parse_args(argv)
    work = {
        name: [
            Conversation(c.id, c.requests[: args.max_turns])
            for c in read_transcripts(need(data_path(name)), args.model, limit=args.runs)
        ]
        for name in FILES
    }
    total = sum(len(c.requests) for convs in work.values() for c in convs)
    tmp = Path(tempfile.mkdtemp(prefix="ui-pages-"))
    config = {
        "database_url": f"sqlite:///{tmp / 'ui.db'}",
        "models": _models("http://placeholder/v1"),
        "auth": {"admin_keys": [hash_key(ADMIN)]},
    }
    rows = []
    with run_simulator(tmp, record=False) as sim:
        config["models"] = _models(sim.base_url)
        with run_gateway(tmp, config) as gw, tqdm(total=total, desc="turns", unit="turn") as bar:
            sent = {name: _send(gw, _tag(name), convs, bar) for name, convs in work.items()}
            for name, convs in work.items():
                rows.append(_measure(gw, name, len(convs), *sent[name], args.repeats))
    _print(rows, args)


def _print(rows: Sequence[Row], args: argparse.Namespace) -> None:
    print(
        f"\n{args.runs} conversations per file, at most {args.max_turns} turns each, model {args.model}, "
        f"median of {args.repeats} fetches\n"
    )
    print(
        "| file | sessions | turns (errors) | sessions list ms (KiB) | longest session: turns, page ms (KiB) "
        "| its last request page ms (KiB) | compactions listed / badged | turns 'summary reused' "
        "| request pages naming a change |"
    )
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for r in rows:
        print(
            f"| {r.file} | {r.sessions} | {r.turns} ({r.errors}) | {r.list_ms:.1f} ({r.list_kib:.0f}) "
            f"| {r.session_turns}, {r.session_ms:.1f} ({r.session_kib:.0f}) | {r.request_ms:.1f} ({r.request_kib:.0f}) "
            f"| {r.compactions_listed} / {r.compactions_badged} | {r.summary_reused} | {r.changes_named:.0%} |"
        )


if __name__ == "__main__":
    main()
