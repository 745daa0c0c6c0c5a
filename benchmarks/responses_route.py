"""What the Responses front door adds over the chat route, and what a chained conversation caches.

    python -m benchmarks.responses_route [--runs 2] [--turns 40] [--context-window 16000]

Real trajectories from ``../shared/data`` (the three ``agent_loops`` files and
``long_conversations/rhelm.jsonl``) are replayed turn by turn through one gateway (default
policy, every pass on) and the provider simulator (cache accounting on). A turn is the
request before each recorded assistant message. Per data file, three passes:

- **latency**: each turn is sent as a chat request (the whole history) and as a Responses
  request with the same history as input items (``store: false``), interleaved and
  alternating which goes first, so both see the same machine; the provider sees the same
  messages. Medians of client-side wall time, their difference and ratio, and the median of
  the per-turn differences (paired: the same turn by both routes).
- **chat cache**: the chat turns alone (simulator cache reset first): the cache share
  (cached / input tokens over all turns) and how many turns the provider saw a summary in.
- **chained cache**: the same conversation as a ``previous_response_id`` chain, each turn
  sending only what is new (the recorded assistant message as items and what follows it;
  the simulator's answer stays in the stored conversation too), rebuilt by Ventana from
  its store. Cache share, summaries, and median wall time.

The model's window is set small (``--context-window``) so long runs cross the compaction
threshold. JSON goes to ``benchmarks/out/responses_route-<time>.json``.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import httpx
import orjson
from tqdm import tqdm

import gateway  # noqa: F401  (offline tiktoken)
from gateway.formats.responses import chat_body, check_request, input_items
from gateway.formats.responses_answer import response_from_chat, response_object
from gateway.providersim.completion import is_summary_request
from tests.procs import SimHandle, run_gateway, run_simulator
from tests.shared_data import data_path, need

OUT = Path(__file__).resolve().parent / "out"
FILES = (
    "agent_loops/mini_swe_agent_deepseek.jsonl",
    "agent_loops/tau2_telecom_default.jsonl",
    "agent_loops/tau2_telecom_solo.jsonl",
    "long_conversations/rhelm.jsonl",
)
MODEL = "bench"


def as_items(messages: list[dict[str, Any]], *, own_turn: bool = False) -> list[dict[str, Any]]:
    """Chat messages as Responses input items (tool calls as function_call items).

    ``own_turn``: every assistant message opens an assistant message item, even without text, so
    its tool calls do not join the simulator's answer stored just before it (replaying a
    recorded turn after the simulator's own would otherwise change an already-sent message)."""
    items: list[dict[str, Any]] = []
    for m in messages:
        role, content = m["role"], m.get("content")
        if role == "tool":
            items.append({"type": "function_call_output", "call_id": m["tool_call_id"], "output": content or ""})
            continue
        if content or (own_turn and role == "assistant"):
            content = content or ""
            if isinstance(content, list):
                kind = "output_text" if role == "assistant" else "input_text"
                content = [{"type": kind, "text": p.get("text", "")} for p in content]
            items.append({"type": "message", "role": role, "content": content})
        for call in m.get("tool_calls") or ():
            fn = call["function"]
            items.append(
                {"type": "function_call", "call_id": call["id"], "name": fn["name"], "arguments": fn["arguments"]}
            )
    return items


def response_tools(tools: list[dict[str, Any]] | None) -> list[dict[str, Any]]:
    return [{"type": "function", "strict": False, **t["function"]} for t in tools or ()]


def turn_ends(messages: list[dict[str, Any]], limit: int) -> list[int]:
    """Where each turn's request ends: before each recorded assistant message, the first ``limit``."""
    return [i for i, m in enumerate(messages) if m["role"] == "assistant" and i > 0][:limit]


def translation_us(messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None, end: int) -> float:
    """CPU the route adds to one turn, in process: request -> chat body (encoded), answer -> Response (encoded)."""
    request = {"model": MODEL, "input": as_items(messages[:end]), **({"tools": response_tools(tools)} if tools else {})}
    answer = {"choices": [{"message": {"role": "assistant", "content": "ok"}, "finish_reason": "stop"}], "usage": None}
    started = time.perf_counter()
    body = check_request(orjson.loads(orjson.dumps(request)))
    orjson.dumps(chat_body(body, input_items(body, "resp_bench")))
    orjson.dumps(response_from_chat(answer, response_object(body, "resp_bench", 0), 0))
    return (time.perf_counter() - started) * 1e6


def _runs(path: Path, count: int) -> Iterator[dict[str, Any]]:
    with need(path).open("rb") as fh:
        for n, line in enumerate(fh):
            if n >= count:
                return
            yield orjson.loads(line)


class Refused(Exception):
    """The gateway answered 400 context_length_exceeded: the turn cannot be made to fit the window."""


def _timed(client: httpx.Client, url: str, body: dict[str, Any], key: str) -> tuple[float, dict[str, Any]]:
    started = time.perf_counter()
    r = client.post(url, content=orjson.dumps(body), headers={"authorization": f"Bearer {key}"})
    elapsed = (time.perf_counter() - started) * 1000
    if r.status_code == 400 and r.json()["error"]["code"] == "context_length_exceeded":
        raise Refused(r.json()["error"]["message"])
    if r.status_code != 200:
        raise RuntimeError(f"{url} answered {r.status_code}: {r.text[:500]}")
    return elapsed, r.json()


def _chat_usage(data: dict[str, Any]) -> tuple[int, int]:
    usage = data["usage"]
    return usage["prompt_tokens"], (usage.get("prompt_tokens_details") or {}).get("cached_tokens", 0)


def _resp_usage(data: dict[str, Any]) -> tuple[int, int]:
    usage = data["usage"]
    return usage["input_tokens"], usage["input_tokens_details"]["cached_tokens"]


def _summarised(sim: SimHandle) -> int:
    """Forwarded bodies (not the summariser's own requests) that carry a compaction summary."""
    bodies = [b for b in sim.received() if not is_summary_request(b["messages"])]
    return sum(1 for b in bodies if any(str(m.get("content") or "").startswith("<summary") for m in b["messages"]))


def measure_file(name: str, gw_url: str, sim: SimHandle, runs: int, turns: int, bar: tqdm) -> dict[str, Any]:
    chat_ms: list[float] = []
    resp_ms: list[float] = []
    chained_ms: list[float] = []
    translate_us: list[float] = []
    totals = {"chat": [0, 0], "chained": [0, 0]}
    summaries = {"chat": 0, "chained": 0}
    refused = {"latency": 0, "chat": 0, "chained": 0}
    requests = 0
    with httpx.Client(base_url=gw_url, timeout=120) as client:
        for n, run in enumerate(_runs(data_path(name), runs)):
            messages, tools = run["messages"], run.get("tools")
            ends = turn_ends(messages, turns)
            chat_extra = {"tools": tools} if tools else {}
            resp_extra = {"tools": response_tools(tools)} if tools else {}
            translate_us.extend(translation_us(messages, tools, end) for end in ends)
            # Pass 1, latency: chat and stateless Responses with the same history, interleaved.
            for t, end in enumerate(ends):
                chat_body = {"model": MODEL, "messages": messages[:end], **chat_extra}
                resp_body = {"model": MODEL, "input": as_items(messages[:end]), "store": False, **resp_extra}
                pair = [("chat", "/chat/completions", chat_body), ("resp", "/responses", resp_body)]
                timed: dict[str, float] = {}
                for kind, path, body in pair if t % 2 == 0 else pair[::-1]:
                    try:
                        timed[kind], _ = _timed(client, path, body, f"sk-lat-{kind}-{n}")
                    except Refused:
                        refused["latency"] += 1
                if len(timed) == 2:  # a turn refused by either route is left out of both
                    chat_ms.append(timed["chat"])
                    resp_ms.append(timed["resp"])
                bar.update(2)
            # Pass 2, chat alone from a cold simulator cache.
            sim.reset()
            for end in ends:
                bar.update(1)
                chat = {"model": MODEL, "messages": messages[:end], **chat_extra}
                try:
                    _, data = _timed(client, "/chat/completions", chat, f"sk-chat-{n}")
                except Refused:
                    refused["chat"] += 1
                    continue
                for i, v in enumerate(_chat_usage(data)):
                    totals["chat"][i] += v
            summaries["chat"] += _summarised(sim)
            # Pass 3, the same turns as a previous_response_id chain, only what is new each turn.
            sim.reset()
            previous, start = None, 0
            for t, end in enumerate(ends):
                body = {"model": MODEL, "input": as_items(messages[start:end], own_turn=True), **resp_extra}
                if previous:
                    body["previous_response_id"] = previous
                try:
                    ms, data = _timed(client, "/responses", body, f"sk-chain-{n}")
                except Refused:  # the chain cannot go on: its remaining turns count as refused
                    refused["chained"] += len(ends) - t
                    bar.update(len(ends) - t)
                    break
                chained_ms.append(ms)
                previous, start = data["id"], end
                for i, v in enumerate(_resp_usage(data)):
                    totals["chained"][i] += v
                bar.update(1)
            summaries["chained"] += _summarised(sim)
            requests += len(ends)
    chat_p50, resp_p50 = statistics.median(chat_ms), statistics.median(resp_ms)
    return {
        "file": name,
        "runs": runs,
        "turns": requests,
        "chat_p50_ms": round(chat_p50, 2),
        "responses_p50_ms": round(resp_p50, 2),
        "added_p50_ms": round(resp_p50 - chat_p50, 2),
        "paired_added_p50_ms": round(statistics.median(r - c for r, c in zip(resp_ms, chat_ms, strict=True)), 2),
        "ratio": round(resp_p50 / chat_p50, 3),
        "translation_p50_us": round(statistics.median(translate_us), 1),
        "translation_max_us": round(max(translate_us), 1),
        "chained_p50_ms": round(statistics.median(chained_ms), 2),
        "chat_cache_share": round(totals["chat"][1] / max(1, totals["chat"][0]), 3),
        "chained_cache_share": round(totals["chained"][1] / max(1, totals["chained"][0]), 3),
        "chat_input_tokens": totals["chat"][0],
        "chained_input_tokens": totals["chained"][0],
        "refused": refused,
        "chat_summarised_turns": summaries["chat"],
        "chained_summarised_turns": summaries["chained"],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=2, help="trajectories per data file")
    parser.add_argument("--turns", type=int, default=40, help="turns per trajectory, from its start")
    parser.add_argument("--context-window", type=int, default=16000, help="the model's window (compaction at 55%%)")
    parser.add_argument("--files", nargs="*", default=list(FILES))
    args = parser.parse_args()
    rows = []
    with ExitStack() as stack:
        tmp = Path(stack.enter_context(tempfile.TemporaryDirectory()))
        sim = stack.enter_context(run_simulator(tmp))
        model = {
            "name": MODEL,
            "litellm_model": "openai/gpt-4o-mini",
            "api_base": sim.base_url,
            "context_window": args.context_window,
        }
        gw = stack.enter_context(run_gateway(tmp, {"models": [model]}))
        planned = 0
        for name in args.files:
            planned += sum(
                len(turn_ends(r["messages"], args.turns)) * 4 for r in _runs(data_path(name), args.runs)
            )
        with tqdm(total=planned, unit="req") as bar:
            for name in args.files:
                bar.set_description(name.rsplit("/", 1)[-1])
                rows.append(measure_file(name, gw.base_url, sim, args.runs, args.turns, bar))
    OUT.mkdir(exist_ok=True)
    out = OUT / f"responses_route-{time.strftime('%Y%m%d-%H%M%S')}.json"
    out.write_bytes(orjson.dumps({"args": vars(args), "rows": rows}, option=orjson.OPT_INDENT_2))
    print(_table(rows))
    print(f"\nwritten to {out}")


def _table(rows: list[dict[str, Any]]) -> str:
    head = (
        "| data file | runs / turns | chat p50 ms | Responses p50 ms | added ms (paired) | ratio "
        "| translation us p50 / max | chained p50 ms "
        "| cache share chat / chained | turns with a summary chat / chained | refused latency / chat / chained |"
    )
    lines = [head, "|" + " --- |" * 11]
    for r in rows:
        lines.append(
            f"| {r['file']} | {r['runs']} / {r['turns']} | {r['chat_p50_ms']} | {r['responses_p50_ms']} "
            f"| {r['added_p50_ms']:+} ({r['paired_added_p50_ms']:+}) | {r['ratio']} "
            f"| {r['translation_p50_us']} / {r['translation_max_us']} | {r['chained_p50_ms']} "
            f"| {r['chat_cache_share']:.1%} / {r['chained_cache_share']:.1%} "
            f"| {r['chat_summarised_turns']} / {r['chained_summarised_turns']} "
            f"| {r['refused']['latency']} / {r['refused']['chat']} / {r['refused']['chained']} |"
        )
    return "\n".join(lines)


if __name__ == "__main__":
    main()
