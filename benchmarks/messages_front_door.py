"""Benchmark the Messages front door on the shared data: Anthropic-format traffic through Ventana.

    python -m benchmarks.messages_front_door                 # 5 conversations a file, their last 12 turns
    python -m benchmarks.messages_front_door --per-file 1 --requests 6   # a smoke check

Every data file holds chat conversations; each is rewritten in the Messages format (system
apart, tool calls as ``tool_use`` blocks, tool results as ``tool_result`` blocks in user
turns, same-role turns merged as Anthropic requires) and replayed against a real gateway
process: one request for each of its last ``--requests`` assistant turns, in one session.
The model is an Anthropic upstream (``anthropic/...``), so litellm
sends the assembled native request to the simulator's ``/v1/messages``, which accounts
Anthropic's prompt cache. Reported per file: requests answered and failed (a failure is a
miss, not skipped), requests compacted, requests whose forwarded ``tool_use`` blocks all
kept their ``tool_result``, the tokens the client sent (``count_tokens``) and the provider
billed, the provider's cache-read share, and the in-process cost of the two translations.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import orjson
from tqdm import tqdm

import gateway  # noqa: F401  (offline tiktoken)
from gateway.formats.anthropic_messages import chat_body, message_from_chat
from gateway.providersim.completion import is_summary_request
from tests.procs import SimHandle, run_gateway, run_simulator
from tests.shared_data import DATA_FILES, data_path, need

FILES = DATA_FILES
MODEL = "claude-bench"
WINDOW = 32_000
KEY_ENV = "VENTANA_BENCH_SIM_ANTHROPIC_KEY"


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    return ""


def _blocks(message: dict[str, Any]) -> list[dict[str, Any]]:
    role = message.get("role")
    if role == "tool":
        text = _text(message.get("content"))
        return [{"type": "tool_result", "tool_use_id": message.get("tool_call_id", ""), "content": text}]
    blocks: list[dict[str, Any]] = []
    text = _text(message.get("content"))
    if text:
        blocks.append({"type": "text", "text": text})
    for call in message.get("tool_calls") or ():
        fn = call.get("function") or {}
        try:
            args = orjson.loads(fn.get("arguments") or "{}")
        except orjson.JSONDecodeError:
            args = {"_raw": fn.get("arguments")}
        blocks.append(
            {
                "type": "tool_use",
                "id": call.get("id", ""),
                "name": fn.get("name", ""),
                "input": args if isinstance(args, dict) else {"value": args},
            }
        )
    return blocks


def to_messages(messages: list[dict[str, Any]]) -> tuple[str, list[dict[str, Any]]]:
    """The system text and the Messages-format turns of a chat history (same-role turns merged)."""
    system = "\n\n".join(_text(m.get("content")) for m in messages if m.get("role") in ("system", "developer"))
    turns: list[dict[str, Any]] = []
    for message in messages:
        if message.get("role") in ("system", "developer"):
            continue
        role = "assistant" if message.get("role") == "assistant" else "user"
        blocks = _blocks(message)
        if not blocks:
            continue
        if turns and turns[-1]["role"] == role:
            turns[-1]["content"] += blocks
        else:
            turns.append({"role": role, "content": blocks})
    for turn in turns:  # Anthropic wants a user turn's tool results before its text
        if turn["role"] == "user":
            turn["content"].sort(key=lambda b: b["type"] != "tool_result")
    return system, turns


def to_tools(tools: list[dict[str, Any]] | None) -> list[dict[str, Any]]:
    out = []
    for tool in tools or ():
        fn = tool.get("function") or {}
        schema = fn.get("parameters") or {"type": "object", "properties": {}}
        out.append({"name": fn.get("name", ""), "description": fn.get("description", ""), "input_schema": schema})
    return out


def requests_of(row: dict[str, Any], limit: int) -> Iterator[dict[str, Any]]:
    """The Messages requests of the last ``limit`` assistant turns, in order, as the agent sent them.

    Consecutive turns, not a sample spread over the run: Anthropic's cache reads only reach
    20 blocks back from a breakpoint, so a sparse sample would measure a cache no client sees.
    """
    system, turns = to_messages(row["messages"])
    ends = [i for i, t in enumerate(turns) if t["role"] == "assistant" and i > 0]
    if not ends and turns and turns[-1]["role"] == "user":
        ends = [len(turns)]
    ends = ends[-limit:]
    tools = to_tools(row.get("tools"))
    for end in ends:
        request: dict[str, Any] = {"model": MODEL, "max_tokens": 256, "messages": turns[:end]}
        if system:
            request["system"] = system
        if tools:
            request["tools"] = tools
        yield request


def _pairs_intact(body: dict[str, Any]) -> bool:
    messages = body.get("messages") or []
    for i, m in enumerate(messages):
        content = m.get("content") if isinstance(m.get("content"), list) else []
        uses = {b.get("id") for b in content if b.get("type") == "tool_use"}
        if uses:
            nxt = messages[i + 1].get("content") if i + 1 < len(messages) else []
            results = {b.get("tool_use_id") for b in nxt if isinstance(b, dict) and b.get("type") == "tool_result"}
            if not uses <= results:
                return False
    return True


def _translation_us(request: dict[str, Any], answer: dict[str, Any], repeat: int = 5) -> float:
    """Microseconds to translate the request to chat and a chat answer back, in process: the best
    of ``repeat`` runs, since the gateway and simulator share the machine's two cores with it."""
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        chat_body(request, "anthropic")
        message_from_chat(answer, MODEL)
        best = min(best, time.perf_counter() - start)
    return best * 1e6


def run_file(client: httpx.Client, sim: SimHandle, name: str, per_file: int, limit: int) -> dict[str, Any]:
    path = need(data_path(name))
    rows: list[dict[str, Any]] = []
    with path.open("rb") as fh:
        for line in fh:
            row = orjson.loads(line)
            if row.get("messages"):
                rows.append(row)
            if len(rows) >= per_file:
                break
    sim.reset()
    stats: dict[str, Any] = {"file": name, "conversations": len(rows), "requests": 0, "ok": 0, "failed": 0}
    client_tokens = billed = read = 0
    translation: list[float] = []
    errors: list[str] = []
    work = [(n, r) for n, row in enumerate(rows) for r in requests_of(row, limit)]
    for n, request in tqdm(work, desc=name, leave=False):
        stats["requests"] += 1
        headers = {"x-session-id": f"bench-{name}-{n}"}
        counted = client.post("/v1/messages/count_tokens", json=request, headers=headers)
        answered = client.post("/v1/messages", json=request, headers=headers)
        if answered.status_code != 200 or counted.status_code != 200:
            stats["failed"] += 1
            errors.append(f"{answered.status_code}: {answered.text[:160]}")
            continue
        stats["ok"] += 1
        usage = answered.json()["usage"]
        client_tokens += counted.json()["input_tokens"]
        billed += usage["input_tokens"] + usage["cache_read_input_tokens"] + usage["cache_creation_input_tokens"]
        read += usage["cache_read_input_tokens"]
        chat_answer = {"id": "x", "choices": [{"message": {"content": "ok"}, "finish_reason": "stop"}], "usage": {}}
        translation.append(_translation_us(request, chat_answer))
    received = [b for b in sim.received() if not is_summary_request(b.get("messages") or [])]
    stats["compacted"] = sum(1 for b in received if "<summary" in str(b.get("messages")))
    stats["pairs_intact"] = f"{sum(1 for b in received if _pairs_intact(b))}/{len(received)}"
    stats["client_tokens"] = client_tokens
    stats["billed_tokens"] = billed
    stats["cache_read_share"] = read / billed if billed else 0.0
    stats["translate_us_median"] = statistics.median(translation) if translation else 0.0
    stats["errors"] = errors[:3]
    return stats


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--per-file", type=int, default=5, help="conversations taken from the start of each file")
    parser.add_argument("--requests", type=int, default=12, help="requests per conversation: its last N turns")
    parser.add_argument("--window", type=int, default=WINDOW, help="the model's context window (compaction at 55%%)")
    args = parser.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="bench-messages-"))
    results = []
    with run_simulator(tmp) as sim:
        model = {
            "name": MODEL,
            "litellm_model": "anthropic/claude-sonnet-4-5",
            "api_base": sim.url,
            "api_key_env": KEY_ENV,
            "context_window": args.window,
        }
        env = {KEY_ENV: "sk-bench", "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
        with run_gateway(tmp, {"models": [model]}, env=env) as gw, httpx.Client(base_url=gw.url, timeout=120) as client:
            for name in tqdm(FILES, desc="files"):
                results.append(run_file(client, sim, name, args.per_file, args.requests))
    cols = ("file", "conversations", "requests", "ok", "failed", "compacted", "pairs_intact")
    print("| " + " | ".join(cols) + " | client tokens | billed tokens | cache-read share | translate µs (median) |")
    print("|" + " --- |" * (len(cols) + 4))
    for r in results:
        cells = [str(r[c]) for c in cols]
        extra = [
            str(r["client_tokens"]),
            str(r["billed_tokens"]),
            f"{r['cache_read_share']:.1%}",
            f"{r['translate_us_median']:.0f}",
        ]
        print("| " + " | ".join(cells + extra) + " |")
    for r in results:
        for error in r["errors"]:
            print(f"{r['file']}: {error}")


if __name__ == "__main__":
    main()
