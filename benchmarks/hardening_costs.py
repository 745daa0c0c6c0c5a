"""What issue 25's hardening costs per request, on the real conversations of every data file.

For each data file under the shared data directory, a few runs are replayed turn by turn the
way a client sends them (the whole history each turn, the same message objects resent, as
``sessions.resent`` makes them) and the new per-request work is timed:

- ``validate``: ``validate_chat_request`` on the new messages (the depth check included), and the
  depth check alone (``_validate_depth``: an ``orjson.dumps`` of each new message and container);
- ``redact``: the default secret masking of the record (``Redactor(secrets=True).record``), first
  turn and mean over turns, and how many records held a secret shape;
- ``closers``: gateway block closers (any case) found in the data, which ``defuse_closers`` escapes.

    python -m benchmarks.hardening_costs --runs 5 --turns 60
"""

from __future__ import annotations

import argparse
import re
import statistics
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
from tqdm import tqdm

from benchmarks.tool_cases import data_dir
from gateway.api.validate import _validate_depth, validate_chat_request
from gateway.assembly.defuse_closers import GATEWAY_TAGS
from gateway.store.record import RequestRecord
from gateway.store.redact import Redactor
from gateway.upstream.usage import Usage
from tests.shared_data import need

_CLOSER = re.compile(r"<\s*/\s*(?:" + "|".join(GATEWAY_TAGS) + r")\b", re.IGNORECASE)


def data_files(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob("*.jsonl"))


def runs(path: Path, limit: int) -> Iterator[dict[str, Any]]:
    with path.open("rb") as lines:
        for i, line in enumerate(lines):
            if i >= limit:
                return
            yield orjson.loads(line)


def turns(run: dict[str, Any], limit: int) -> Iterator[tuple[dict[str, Any], str]]:
    """(request body, the answer that followed) before each assistant message and at the end of a run
    that ends on the client's turn; the same message objects every turn."""
    messages, tools = run.get("messages") or [], run.get("tools")
    made = 0
    for i, message in enumerate(messages):
        if i and message.get("role") == "assistant" and made < limit:
            body: dict[str, Any] = {"model": "gpt-4o-mini", "messages": messages[:i]}
            if tools:
                body["tools"] = tools
            made += 1
            yield body, str(message.get("content") or "")
    if messages and messages[-1].get("role") != "assistant" and made < limit:  # the turn the run ends on
        yield {"model": "gpt-4o-mini", "messages": messages, **({"tools": tools} if tools else {})}, ""


def _record(body: dict[str, Any], answer: str, n: int) -> RequestRecord:
    return RequestRecord.of(
        request_id=f"req-{n}",
        session_id="s",
        created_at=time.time(),
        model="gpt-4o-mini",
        provider="openai",
        caller="c",
        original=body,
        assembled=body,
        response_text=answer,
        usage=Usage(),
    )


def measure(path: Path, runs_per_file: int, turns_per_run: int) -> dict[str, Any]:
    validate_us, depth_us, redact_ms, first_ms = [], [], [], []
    masked = closers = n = 0
    for run in runs(path, runs_per_file):
        redactor, known = Redactor((), secrets=True), 0
        for turn, (body, answer) in enumerate(turns(run, turns_per_run)):
            t0 = time.perf_counter()
            validate_chat_request(body, max_messages=100_000, known_valid=known)
            t1 = time.perf_counter()
            for message in body["messages"][known:]:
                _validate_depth(message, "m")
            for name, value in body.items():
                if name != "messages" and value.__class__ in (dict, list):
                    _validate_depth(value, name)
            t2 = time.perf_counter()
            record = _record(body, answer, n)
            out = redactor.record(record)
            t3 = time.perf_counter()
            validate_us.append((t1 - t0) * 1e6)
            depth_us.append((t2 - t1) * 1e6)
            (first_ms if turn == 0 else redact_ms).append((t3 - t2) * 1e3)
            masked += out is not record
            closers += sum(len(_CLOSER.findall(str(m.get("content")))) for m in body["messages"][known:])
            known, n = len(body["messages"]), n + 1
    return {
        "file": path.name,
        "requests": n,
        "validate_us": statistics.mean(validate_us) if validate_us else 0.0,
        "depth_us": statistics.mean(depth_us) if depth_us else 0.0,
        "redact_first_ms": statistics.mean(first_ms) if first_ms else 0.0,
        "redact_turn_ms": statistics.mean(redact_ms) if redact_ms else 0.0,
        "redact_max_ms": max(redact_ms + first_ms, default=0.0),
        "records_masked": masked,
        "closers": closers,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=data_dir(), help="default: $VENTANA_DATA or shared/data")
    parser.add_argument("--runs", type=int, default=5, help="runs (lines) per data file")
    parser.add_argument("--turns", type=int, default=60, help="requests per run")
    args = parser.parse_args()
    rows = [measure(p, args.runs, args.turns) for p in tqdm(data_files(need(args.data)), desc="data files")]
    print(
        "| data file | requests | validate µs/req | depth check µs/req | redact 1st turn ms | redact ms/turn |"
        " redact max ms | records with a secret | block closers in data |"
    )
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for r in rows:
        print(
            f"| {r['file']} | {r['requests']} | {r['validate_us']:.1f} | {r['depth_us']:.1f} | "
            f"{r['redact_first_ms']:.2f} | {r['redact_turn_ms']:.2f} | {r['redact_max_ms']:.2f} | "
            f"{r['records_masked']} | {r['closers']} |"
        )


if __name__ == "__main__":
    main()
