"""Recall's tool mode end to end: openai SDK -> ``ventana serve`` -> the provider simulator.

With ``policy.memory.mode: tool`` the gateway offers its own ``recall_archive`` tool once the
session has compacted. The simulator calls it when a question's words appear nowhere in what it
was sent; the gateway must answer that call itself from the session's archive and send the
follow-up request, streamed or not, so the client only gets the model's answer. Another caller
using the same session name must never be given the first caller's passages.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import openai
import pytest

from gateway.assembly.memory_blocks import RECALL_TOOL_NAME
from tests.procs import GatewayHandle, SimHandle, run_gateway, sim_models
from tests.store.records import recorded

SYSTEM = {"role": "system", "content": "You are a coding assistant."}
FILLER = "We went through the sprint board, the retro notes and the on-call rota once more. " * 5
#: One key holder stated per turn: more than a 20-token summary keeps (half of it a line of names), so some
#: are only in the archive.
HOLDERS = (
    ("boiler room", "Marisol"),
    ("bike shed", "Tobias"),
    ("server cage", "Ingrid"),
    ("wine cellar", "Odette"),
    ("roof hatch", "Ferdinand"),
    ("tool crib", "Yusuf"),
    ("garden gate", "Priya"),
    ("loading dock", "Wendell"),
    ("print studio", "Ximena"),
    ("dark room", "Lorcan"),
    ("chapel vestry", "Beatrix"),
    ("map archive", "Quentin"),
)


def _question(item: str) -> dict[str, str]:
    return {"role": "user", "content": f"Who holds the key to the {item}?"}


@pytest.fixture(scope="module")
def database(tmp_path_factory: pytest.TempPathFactory) -> str:
    return f"sqlite:///{tmp_path_factory.mktemp('recall-tool-db') / 'store.db'}"


@pytest.fixture(scope="module")
def recall_gateway(sim: SimHandle, database: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[GatewayHandle]:
    models = [{**sim_models(sim.base_url)[0], "name": "tiny-window", "context_window": 1500}]
    config = {
        "models": models,
        "database_url": database,
        "policy": {
            "memory": {"mode": "tool", "recall_budget_tokens": 400, "passage_tokens": 120},
            "compaction": {"summary_max_tokens": 20, "keep_recent_turns": 2, "prepare_at": 0.55},
        },
    }
    with run_gateway(tmp_path_factory.mktemp("gw-recall-tool"), config) as handle:
        yield handle


def _client(gw: GatewayHandle, key: str, session: str) -> openai.OpenAI:
    return openai.OpenAI(base_url=gw.base_url, api_key=key, max_retries=0, default_headers={"X-Session-Id": session})


def _long_session(client: openai.OpenAI, planted: bool) -> list[dict[str, Any]]:
    """Twelve turns sent one by one, so the first ones are compacted (and archived)."""
    history: list[dict[str, Any]] = [SYSTEM]
    for i, (item, person) in enumerate(HOLDERS):
        text = f"Turn {i}: {FILLER}" + (f"The key to the {item} is with {person}." if planted else "")
        history += [{"role": "user", "content": text}, {"role": "assistant", "content": "Noted."}]
        client.chat.completions.create(model="tiny-window", messages=history)
    return history


def _forgotten(sent: dict[str, Any]) -> tuple[str, str]:
    """A holder whose name the last request of the session no longer carries (only the archive has it)."""
    seen = json.dumps(sent["messages"])
    lost = [(item, person) for item, person in HOLDERS if person not in seen]
    assert lost, "the summary kept every holder: nothing to recall"
    return lost[0]


def _recalled_holder(client: openai.OpenAI, sim: SimHandle) -> tuple[list[dict[str, Any]], str, str]:
    """A long session, and a holder only its archive has, which the session's own recall finds."""
    sim.reset()
    history = _long_session(client, planted=True)
    item, person = _forgotten(sim.received()[-1])
    client.chat.completions.create(model="tiny-window", messages=[*history, _question(item)])
    assert person in json.dumps(sim.received()[-1]), "the session's own recall finds it"
    return history, item, person


def _tool_names(body: dict[str, Any]) -> list[str]:
    return [t["function"]["name"] for t in body.get("tools") or ()]


@pytest.mark.parametrize("stream", [False, True])
def test_the_gateway_answers_recall_itself_and_the_client_gets_the_answer(
    recall_gateway: GatewayHandle, sim: SimHandle, database: str, stream: bool
) -> None:
    client = _client(recall_gateway, "sk-dana-1", f"dana-{stream}")
    sim.reset()
    history = _long_session(client, planted=True)
    item, person = _forgotten(sim.received()[-1])
    sim.reset()
    raw = client.chat.completions.with_raw_response.create(
        model="tiny-window",
        messages=[*history, _question(item)],
        stream=stream,
        **({"stream_options": {"include_usage": True}} if stream else {}),
    )
    got = raw.parse()
    if stream:
        chunks = list(got)
        text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
        calls = [t for c in chunks if c.choices for t in c.choices[0].delta.tool_calls or ()]
        usage = next(c.usage for c in chunks if c.usage is not None)
    else:
        text, calls, usage = got.choices[0].message.content or "", got.choices[0].message.tool_calls or [], got.usage
    assert text.startswith("Simulated answer") and not calls, "the client never sees the recall call"
    first, second = sim.received()
    assert _tool_names(first) == [RECALL_TOOL_NAME] and _tool_names(second) == [RECALL_TOOL_NAME]
    assert not any(str(m.get("content")).startswith("<recalled") for m in first["messages"]), "no inline block"
    asked, answered = second["messages"][-2:]
    assert asked["role"] == "assistant" and asked["tool_calls"][0]["function"]["name"] == RECALL_TOOL_NAME
    assert answered["role"] == "tool" and answered["tool_call_id"] == asked["tool_calls"][0]["id"]
    assert str(answered["content"]).startswith("<recalled") and person in str(answered["content"])
    assert second["messages"][: len(first["messages"])] == first["messages"], "the follow-up extends the request"
    assert usage is not None and usage.prompt_tokens > len(json.dumps(first["messages"])) // 8
    record = recorded(database, raw.headers["x-ventana-request-id"])
    served = [d for d in record.decisions if d["action"] == "recall_served"]
    assert len(served) == 1 and served[0]["pass"] == "recall_memory" and served[0]["detail"]["passages"]
    assert record.assembled["messages"][-1]["role"] == "tool", "the record holds what the model saw last"


def test_a_rewound_conversations_recall_finds_nothing_said_after_its_end(
    recall_gateway: GatewayHandle, sim: SimHandle
) -> None:
    """The tool gives what inline recall gives: to a client gone back to its first turn, nothing archived from
    the turns after it (the abandoned branch), only the answer that nothing matches."""
    client = _client(recall_gateway, "sk-erin-1", "erin")
    history, item, person = _recalled_holder(client, sim)
    sim.reset()
    got = client.chat.completions.create(model="tiny-window", messages=[*history[:3], _question(item)])
    assert got.choices[0].message.content and not got.choices[0].message.tool_calls
    received = sim.received()
    assert len(received) == 2 and received[1]["messages"][-1]["role"] == "tool", "the recall call was served"
    assert str(received[1]["messages"][-1]["content"]).startswith("No earlier turn")
    assert person not in json.dumps(received)


def test_another_callers_recall_never_returns_the_first_callers_passages(
    recall_gateway: GatewayHandle, sim: SimHandle
) -> None:
    ann = _client(recall_gateway, "sk-ann-1", "same-name")
    _, item, person = _recalled_holder(ann, sim)
    bob = _client(recall_gateway, "sk-bob-1", "same-name")  # the same session name, another caller
    history = _long_session(bob, planted=False)
    sim.reset()
    got = bob.chat.completions.create(model="tiny-window", messages=[*history, _question(item)])
    assert got.choices[0].message.content and not got.choices[0].message.tool_calls
    received = sim.received()
    assert len(received) == 2 and received[1]["messages"][-1]["role"] == "tool", "Bob's recall was served"
    assert person not in json.dumps(received), "nothing of Ann's archive reaches Bob's requests"


def test_a_config_in_tool_mode_starts(tmp_path: Path, sim: SimHandle) -> None:
    """The validator that refused ``mode: tool`` at start-up is gone."""
    config = {"models": sim_models(sim.base_url), "policy": {"memory": {"mode": "tool"}}}
    with run_gateway(tmp_path, config) as gw:
        got = _client(gw, "sk-carl-1", "carl").chat.completions.create(
            model="gpt-4o-mini", messages=[_question("attic")]
        )
        assert got.choices[0].message.content
