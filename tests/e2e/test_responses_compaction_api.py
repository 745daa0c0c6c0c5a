"""OpenAI's Responses compaction served by the gateway for any model: ``/responses/compact`` and
``context_management``, through the openai SDK and the OpenAI Agents SDK's compaction session, to the
simulator's chat route. The simulator's record is what the model read."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import openai
import pytest

from tests.procs import GatewayHandle, SimHandle, run_gateway, sim_models

FACT = "The vault combination is 31-07-1987."


def _conversation(turns: int) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = [{"role": "user", "content": f"Help me plan the office move. {FACT}"}]
    for turn in range(turns):
        items += [
            {"role": "assistant", "content": f"Step {turn}: pack the shelves of room {turn} and label each box."},
            {"role": "user", "content": f"Done with room {turn}; the movers arrive at {8 + turn % 9}:00 next."},
        ]
    return items


@pytest.fixture(scope="module")
def gateway(sim: SimHandle, tmp_path_factory: pytest.TempPathFactory) -> Iterator[GatewayHandle]:
    tmp = tmp_path_factory.mktemp("gw-compact")
    with run_gateway(tmp, {"models": sim_models(sim.base_url)}) as handle:
        yield handle


def _client(gw: GatewayHandle, key: str = "sk-alice") -> openai.OpenAI:
    return openai.OpenAI(base_url=gw.base_url, api_key=key, max_retries=0)


def _text(messages: list[dict[str, Any]]) -> str:
    return "\n".join(str(m.get("content")) for m in messages)


def test_compact_returns_a_sealed_item_that_round_trips(gateway: GatewayHandle, sim: SimHandle) -> None:
    client = _client(gateway)
    compacted = client.responses.compact(model="small-window", input=_conversation(60))  # type: ignore[arg-type]
    assert compacted.object == "response.compaction"
    kinds = [item.type for item in compacted.output]
    assert kinds == ["message", "compaction"], kinds
    assert compacted.usage.input_tokens > compacted.usage.output_tokens > 0
    token = compacted.output[-1].encrypted_content  # type: ignore[union-attr]
    assert FACT not in token and "vault" not in token  # sealed, not merely encoded

    sim.reset()
    history = [item.model_dump(exclude_none=True, warnings=False) for item in compacted.output]
    reply = client.responses.create(
        model="small-window", input=[*history, {"role": "user", "content": "What is the vault combination?"}]
    )
    assert reply.output_text
    received = sim.received()[-1]["messages"]
    seen = _text(received)
    assert "compacted by the gateway" in seen and "31-07-1987" in seen
    assert received[-1]["content"] == "What is the vault combination?"
    assert len(received) < 10, "the 121 items were replaced by the task, the summary and the newest turn"


def test_a_tampered_or_foreign_item_is_refused(gateway: GatewayHandle) -> None:
    compacted = _client(gateway).responses.compact(model="small-window", input=_conversation(10))  # type: ignore[arg-type]
    item = compacted.output[-1].model_dump(warnings=False)
    tampered = {**item, "encrypted_content": item["encrypted_content"][:-6] + "AAAAAA"}
    for client, sent in ((_client(gateway), tampered), (_client(gateway, "sk-mallory"), item)):
        with pytest.raises(openai.BadRequestError) as err:
            client.responses.create(model="small-window", input=[sent, {"role": "user", "content": "go on"}])
        body = err.value.body
        assert isinstance(body, dict) and body.get("code") == "invalid_encrypted_content", body
        assert body.get("param") == "input[0].encrypted_content"


def test_context_management_keeps_a_long_chain_under_the_threshold(gateway: GatewayHandle, sim: SimHandle) -> None:
    client = _client(gateway)
    threshold = 1200
    items: list[Any] = [{"role": "user", "content": f"Plan the move with me. {FACT}"}]
    sizes, compactions = [], 0
    for turn in range(60):
        sim.reset()
        reply = client.responses.create(
            model="small-window",
            input=items,
            context_management=[{"type": "compaction", "compact_threshold": threshold}],  # type: ignore[arg-type]
            extra_headers={"x-session-id": "compaction-chain"},
        )
        output = [item.model_dump(exclude_none=True) for item in reply.output]
        sizes.append(reply.usage.input_tokens if reply.usage else 0)
        if output and output[0]["type"] == "compaction":
            compactions += 1
            items = output  # the client drops everything before the compaction item, as OpenAI documents
        else:
            items = [*items, *output]
        items.append({"role": "user", "content": f"Room {turn} is packed; the movers come at {8 + turn % 9}:00."})
    assert compactions >= 2
    assert max(sizes[5:]) <= threshold + 400, sizes  # one turn may cross it; the next is compacted back
    sim.reset()
    client.responses.create(model="small-window", input=[*items, {"role": "user", "content": "Vault combination?"}])
    assert "31-07-1987" in _text(sim.received()[-1]["messages"]), "the planted fact survives every compaction"


async def test_agents_sdk_compaction_session(gateway: GatewayHandle, sim: SimHandle, tmp_path: Path) -> None:
    agents = pytest.importorskip("agents")
    from agents import Agent, RunConfig, Runner, SQLiteSession
    from agents.memory import OpenAIResponsesCompactionSession
    from agents.models.openai_provider import OpenAIProvider

    client = openai.AsyncOpenAI(base_url=gateway.base_url, api_key="sk-agent", max_retries=0)
    session = OpenAIResponsesCompactionSession(
        session_id="agents-compaction",
        underlying_session=SQLiteSession("agents-compaction", str(tmp_path / "s.db")),
        client=client,
        model="gpt-4o-mini",  # the SDK only compacts for OpenAI model names
        compaction_mode="input",
        should_trigger_compaction=lambda context: True,  # compact after every turn: the route is exercised
    )
    config = RunConfig(model_provider=OpenAIProvider(openai_client=client, use_responses=True), tracing_disabled=True)
    agent = Agent(name="mover", instructions="Help plan an office move.", model="gpt-4o-mini")
    await Runner.run(agent, f"Remember this. {FACT}", session=session, run_config=config)
    for turn in range(3):
        await Runner.run(agent, f"Room {turn} is packed.", session=session, run_config=config)
    kept = await session.get_items()
    assert any(item.get("type") == "compaction" for item in kept), kept
    sim.reset()
    await Runner.run(agent, "What was the vault combination?", session=session, run_config=config)
    assert "31-07-1987" in _text(sim.received()[-1]["messages"])
    del agents


def test_a_compaction_item_survives_a_restart(sim: SimHandle, tmp_path: Path) -> None:
    config = {"models": sim_models(sim.base_url)}
    with run_gateway(tmp_path, config) as gw:
        compacted = _client(gw).responses.compact(model="small-window", input=_conversation(12))  # type: ignore[arg-type]
    item = compacted.output[-1].model_dump(warnings=False)
    with run_gateway(tmp_path, config) as gw:  # same working directory: the same key file
        reply = _client(gw).responses.create(model="small-window", input=[item, {"role": "user", "content": "next?"}])
    assert reply.output_text
    assert (tmp_path / "ventana-secret.key").stat().st_mode & 0o777 == 0o600


def test_a_compaction_trigger_is_answered_with_one_compaction_item(gateway: GatewayHandle, sim: SimHandle) -> None:
    """Codex's remote compaction v2: ``{"type": "compaction_trigger"}`` last in ``input`` of a streamed, unstored
    request; the answer's one output item is the compaction item, and Codex then sends its own user messages
    followed by that item."""
    client = _client(gateway)
    history = _conversation(40)
    sim.reset()
    asked: list[Any] = [*history, {"type": "compaction_trigger"}]
    stream = client.responses.create(model="small-window", input=asked, stream=True, store=False)
    events = list(stream)
    assert sim.received() == [], "the gateway compacts; no model is called"
    kinds = [e.type for e in events]
    assert kinds[-3:] == ["response.output_item.added", "response.output_item.done", "response.completed"]
    completed = events[-1].response  # type: ignore[union-attr]
    assert [item.type for item in completed.output] == ["compaction"]
    assert completed.usage is not None and completed.usage.input_tokens > completed.usage.output_tokens > 0
    item = events[-2].item.model_dump(exclude_none=True, warnings=False)  # type: ignore[union-attr]
    assert item == completed.output[0].model_dump(exclude_none=True, warnings=False)

    users = [m for m in history if m["role"] == "user"]
    after: list[Any] = [*users, item, {"role": "user", "content": "Vault combination?"}]
    client.responses.create(model="small-window", input=after)
    seen = _text(sim.received()[-1]["messages"])
    assert "compacted by the gateway" in seen and "31-07-1987" in seen
    assert seen.count("Done with room 39;") == 1, "the client's own user messages are not said twice"
    assert seen.index("compacted by the gateway") > seen.index("Done with room 39;"), "the item stands where it was put"

    with pytest.raises(openai.BadRequestError) as err:  # anywhere but last is refused, naming the item
        client.responses.create(model="small-window", input=asked[-1:] + history)
    assert isinstance(err.value.body, dict) and err.value.body.get("param") == "input[0]"


def test_a_compaction_the_gateway_answers_is_recorded(sim: SimHandle, tmp_path: Path) -> None:
    """No request missing from the log: ``/responses/compact`` and a ``compaction_trigger`` are answered without a
    model call, and each is stored under the request id the client got, nothing billed, one decision."""
    from gateway.store.engine import make_engine
    from gateway.store.queries import get_request

    url = f"sqlite:///{tmp_path / 'store.db'}"
    with run_gateway(tmp_path, {"models": sim_models(sim.base_url), "database_url": url}) as gw:
        client = _client(gw)
        compacted = client.responses.with_raw_response.compact(model="small-window", input=_conversation(20))  # type: ignore[arg-type]
        trigger: list[Any] = [*_conversation(20), {"type": "compaction_trigger"}]
        triggered = client.responses.with_raw_response.create(model="small-window", input=trigger, store=False)
        ids = [r.headers["x-ventana-request-id"] for r in (compacted, triggered)]
        assert triggered.parse().output[0].type == "compaction"
    engine = make_engine(url)
    try:
        for request_id in ids:
            stored = get_request(engine, request_id)
            assert stored is not None, f"{request_id} is in the store"
            row = stored.summary
            assert row.status == 200 and row.route == "responses" and row.caller != "anonymous"
            actions = [(d["pass"], d["action"]) for d in stored.decisions]
            assert actions == [("context_management", "compacted_by_gateway")]
            assert row.upstream_calls == 0 and row.prompt_tokens == 0, "no model was called: nothing billed"
    finally:
        engine.dispose()
