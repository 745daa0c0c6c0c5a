"""Figures from what was forwarded and billed, over a tool loop with reverted turns and served rounds.

The openai SDK drives a tool-using chat through a gateway (in this process, so its Prometheus
counters can be read) to the provider simulator, which records every body it receives. The
loop prunes tools (the simulated model calls the gateway's ``find_tools`` when the tool a new
request needs is hidden), compacts on a 16K window, and has turns the safety check reverts.

Nothing in the gateway fakes a revert: a test pass, placed after compaction, appends an
unmarked message on the turns the client tags ``REVERT-ME`` once a summary is in the context,
and ``verify_assembly`` reverts those turns as it would a real pass's mistake. The figures are
then checked against what the simulator received and against the stored records.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest
from prometheus_client import REGISTRY
from rich.console import Console

from gateway.api import chat as chat_module
from gateway.api.app import create_app
from gateway.api.auth import hash_key
from gateway.assembly.context import Context, Decision
from gateway.assembly.pipeline import FORWARD_PASSES, PassSpec
from gateway.config import parse_settings
from gateway.store.commands import run_logs
from gateway.store.engine import make_engine
from gateway.store.inspect_request import diff_lines
from gateway.store.migrate import upgrade
from gateway.store.queries import get_request, list_requests
from gateway.store.sql_recorder import SqlRecorder
from gateway.tokens import counter_for
from tests.assembly.tool_fixtures import catalogue
from tests.inproc import serve_in_thread
from tests.procs import SimHandle, run_simulator

MODEL = "loop-16k"
ADMIN = "vk-figures-admin"
MARK = "REVERT-ME"
TOOLS = catalogue()
COUNTER = counter_for("o200k_base")
NEEDS = [
    "What's the weather forecast in Paris tomorrow?",
    "Convert 300 euros into dollars at today's exchange rate please.",
    "Set a countdown timer for 25 minutes.",
    "Search airline flights from Paris to Lisbon on Friday.",
    "Book a hotel room in Lisbon for Friday check-in.",
    "Translate the hotel confirmation text into Portuguese.",
    "Latest news headlines about Lisbon transport strikes.",
    "Send an email message to Ana with the trip plan.",
]


def _breaks_when_tagged(ctx: Context, policy: object) -> tuple[Context, list[Decision]]:
    """A pass with a bug on tagged turns once a summary is sent: it appends an unmarked message."""
    last = ctx.messages[-1] if ctx.messages else {}
    has_summary = any(str(m.get("content") or "").startswith("<summary") for m in ctx.messages)
    if MARK not in str(last.get("content") or "") or not has_summary:
        return ctx, []
    messages = (*ctx.messages, {"role": "assistant", "content": "a stray message no client sent"})
    return ctx.replace(messages=messages), []


def _passes() -> tuple[PassSpec, ...]:
    """compact_history with the bug inside it: the stage it produces fails the check, so the fallback
    (issue 34: the latest stage that passes) goes back to before the compaction, which is undone."""
    at = next(i for i, p in enumerate(FORWARD_PASSES) if p.name == "compact_history")
    real = FORWARD_PASSES[at]

    def compact_then_break(ctx: Any, policy: Any) -> Any:
        compacted, made = real.run(ctx, policy)
        broken, _ = _breaks_when_tagged(compacted, policy)
        return broken, made

    spec = PassSpec("compact_history", compact_then_break, real.policy)
    return (*FORWARD_PASSES[:at], spec, *FORWARD_PASSES[at + 1 :])


def _reverted(decisions: list[dict[str, Any]]) -> bool:
    return any(d["action"] in ("reverted", "pass_failed") for d in decisions)


def _summary(body: dict[str, Any]) -> str | None:
    return next(
        (str(m["content"]) for m in body["messages"] if str(m.get("content") or "").startswith("<summary")), None
    )


def _summaries_sent(received: list[dict[str, Any]]) -> int:
    """Compactions that went out, from the bodies the provider received in order: a body whose summary is not
    the one the body before it carried. A turn that reuses a checkpoint, and a served round after the first,
    resend the same bytes; a compaction a revert undid never reached the provider. (A revert drops the
    session's checkpoint, so the turn after it summarises again: that is a compaction that went out.)"""
    count, before = 0, None
    for body in received:
        now = _summary(body)
        count += now is not None and now != before
        before = now
    return count


def _sample(name: str, **labels: str) -> float:
    return REGISTRY.get_sample_value(name, labels) or 0.0


def _pass_totals() -> tuple[float, float]:
    saved = added = 0.0
    for metric in REGISTRY.collect():
        for s in metric.samples:
            if s.labels.get("model") != MODEL:
                continue
            if s.name == "ventana_pass_tokens_saved_total":
                saved += s.value
            elif s.name == "ventana_pass_tokens_added_total":
                added += s.value
    return saved, added


@pytest.fixture(scope="module")
def sim(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SimHandle]:
    with run_simulator(tmp_path_factory.mktemp("figures-sim")) as handle:
        yield handle


def _run_loop(client: openai.OpenAI, tag: set[int]) -> list[str]:
    """A chat with tools: each user need is followed by the model's tool rounds until it answers."""
    messages: list[dict[str, Any]] = [{"role": "system", "content": "You are a travel assistant. Use tools."}]
    ids: list[str] = []
    turn = 0
    for k in range(40):
        need = NEEDS[k % len(NEEDS)] + f" (request {k})"
        messages.append({"role": "user", "content": need})
        for _ in range(4):
            turn += 1
            if turn in tag and messages[-1]["role"] == "tool":
                messages[-1] = {**messages[-1], "content": f"{messages[-1]['content']} {MARK}"}
            raw = client.chat.completions.with_raw_response.create(model=MODEL, messages=messages, tools=TOOLS)
            ids.append(raw.headers["x-ventana-request-id"])
            message = raw.parse().choices[0].message
            calls = message.tool_calls or []
            messages.append(message.model_dump(exclude_none=True))
            if not calls:
                break
            for c in calls:
                result = f"{c.function.name} result for request {k}: " + ("details of the result " * 120)
                messages.append({"role": "tool", "tool_call_id": c.id, "content": result})
    return ids


def _pages(base: str, ids: list[str]) -> dict[str, str]:
    """The inspector's list, the loop's session page and every request page, as served."""
    headers = {"authorization": f"Bearer {ADMIN}"}
    caller = get_request_caller(base, ids[0], headers)
    out = {
        "list": httpx.get(base + "/ui?q=loop", headers=headers).text,
        "session": httpx.get(base + f"/ui/sessions/loop?caller={caller}", headers=headers).text,
    }
    for request_id in ids:
        out[request_id] = httpx.get(base + f"/ui/requests/{request_id}", headers=headers).text
    return out


def get_request_caller(base: str, request_id: str, headers: dict[str, str]) -> str:
    page = httpx.get(base + f"/ui/requests/{request_id}", headers=headers).text
    return page.split("?caller=", 1)[1].split('"', 1)[0]


def test_figures_come_from_what_was_forwarded_and_billed(sim: SimHandle, tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'store.db'}"
    upgrade(url)
    settings = parse_settings(
        {
            "models": [
                {
                    "name": MODEL,
                    "litellm_model": "openai/gpt-4o-mini",
                    "api_base": sim.base_url,
                    "context_window": 16_000,
                }
            ],
            "database_url": url,
            "auth": {"admin_keys": [hash_key(ADMIN)]},
            "policy": {"tools": {"mode": "prune", "max_tools": 3}},
        }
    )
    recorder = SqlRecorder(database_url=url, spool_path=str(tmp_path / "spool.jsonl"))
    saved0, added0 = _pass_totals()
    sent0 = _sample("ventana_prompt_tokens_total", model=MODEL, stage="assembled")
    original0 = _sample("ventana_prompt_tokens_total", model=MODEL, stage="original")
    compactions0 = _sample("ventana_compactions_total", model=MODEL)
    billed0 = _sample("ventana_billed_tokens_total", model=MODEL, kind="prompt")
    changes0 = _sample("ventana_tool_set_changes_total", model=MODEL)
    sim.reset()
    mp = pytest.MonkeyPatch()
    mp.setattr(chat_module, "FORWARD_PASSES", _passes())
    try:
        with serve_in_thread(create_app(settings, recorder=recorder)) as base:
            client = openai.OpenAI(
                base_url=base + "/v1", api_key="sk-loop", max_retries=0, default_headers={"X-Session-Id": "loop"}
            )
            ids = _run_loop(client, tag=set(range(28, 200, 18)) | set(range(30, 200, 17)) | set(range(31, 200, 17)))
            time.sleep(0.5)
            pages = _pages(base, ids)
    finally:
        mp.undo()

    engine = make_engine(url)
    records = [get_request(engine, i) for i in ids]
    assert all(r is not None for r in records)
    stored = [r for r in records if r is not None]
    rounds = [r for r in stored if any(d["pass"] == "find_tools" for d in r.decisions)]
    undone = [r for r in stored if _reverted(r.decisions)]
    undone_compacting = [  # a compaction was decided, the check failed, and the client's request went out
        r
        for r in undone
        if any(d["pass"] == "compact_history" and d["action"] == "compacted" for d in r.decisions)
        and _summary(r.assembled) is None
    ]
    assert rounds, "the loop made no served find_tools round"
    assert undone_compacting, "no reverted turn had its compaction undone: the test would not pin anything"

    # The metric's forwarded tokens are what the simulator received, every call of every request.
    received = [b for b in sim.received() if b.get("messages")]
    forwarded = sum(COUNTER.request(b["messages"], b.get("tools")) for b in received)
    sent = _sample("ventana_prompt_tokens_total", model=MODEL, stage="assembled") - sent0
    assert sent == forwarded
    assert sum(r.summary.tokens_assembled for r in stored) == forwarded

    # The passes' net savings are the original minus what was forwarded.
    original = _sample("ventana_prompt_tokens_total", model=MODEL, stage="original") - original0
    saved, added = _pass_totals()
    net = (saved - saved0) - (added - added0)
    assert abs(net - (original - sent)) <= 0.02 * original, (net, original - sent)

    # Reverted turns are no compaction: the metric counts the summaries the provider received. (A fallback
    # that sends one summary of everything before the newest round is a compaction that went out.)
    compactions = _sample("ventana_compactions_total", model=MODEL) - compactions0
    compacted_turns = _summaries_sent(received)
    assert compactions == compacted_turns

    # Billed usage: the metric, the list, the session page and `ventana logs` all state the records' sum.
    billed = sum(r.summary.prompt_tokens for r in stored)
    assert _sample("ventana_billed_tokens_total", model=MODEL, kind="prompt") - billed0 == billed
    assert f">{billed:,}<" in pages["list"]  # the session's row, billed prompt column
    assert f'id="total-prompt">{billed:,}<' in pages["session"]
    console = Console(record=True, width=400)
    run_logs(settings, console, session="loop", since=None, limit=10_000, as_json=False)
    assert f"prompt {billed:,} " in console.export_text()
    rows = list_requests(engine, session="loop", limit=10_000)
    assert sum(r.prompt_tokens for r in rows) == billed

    # The pages say what happened: reverted turns in a banner, no compaction counted for them,
    # served calls as steps with their tokens.
    assert f"{compacted_turns} compaction" in pages["session"] and 'id="reverted-banner"' in pages["session"]
    changes = _sample("ventana_tool_set_changes_total", model=MODEL) - changes0
    assert changes > 0 and f"{int(changes)} tool-set change" in pages["session"]  # before: searches left out
    assert 'id="reverted-banner"' in pages[undone_compacting[0].summary.request_id]
    # The diff is by message identity: no message forwarded unchanged shows as removed and re-added,
    # and summarised or cleared ranges and unchanged runs are one line each.
    for r in stored:
        lines = diff_lines(r)
        plus = {line[5:] for line in lines if line.startswith("+") and not line.startswith("+tool")}
        minus = {line[5:] for line in lines if line.startswith("-") and not line.startswith(("-tool", "- #"))}
        assert not plus & minus, r.summary.request_id
        entries = {line[:4] for line in lines}  # a message's lines share its sign and index
        assert len(entries) < 30, (r.summary.request_id, len(entries))
    served = rounds[0].summary
    assert pages[served.request_id].count('<tr class="step">') == served.upstream_calls > 1
