"""The loop over the gateway's own tools, without a network: a scripted upstream, a real archive.

The upstream here is a function returning chat completions in order; the recall tool searches
a real (migrated SQLite) archive through a real ``MemoryRuntime``.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any

import orjson
import pytest

from gateway.assembly.memory_blocks import RECALL_TOOL, RECALL_TOOL_NAME
from gateway.config import parse_settings
from gateway.edges.memory import MemoryRuntime
from gateway.edges.recall_tool import NOTHING_FOUND, recall_tool
from gateway.edges.served_tools import ServedTools, _reassemble, offers_own
from gateway.memory.archive import archive, passages_of
from gateway.store.migrate import upgrade
from gateway.store.record import Forwarded
from gateway.tokens import counter_for
from gateway.upstream.usage import Usage

COUNTER = counter_for("o200k_base")
LOOKUP = {"type": "function", "function": {"name": "lookup", "description": "Look a booking up"}}
HISTORY = [
    {"role": "system", "content": "You book travel."},
    {"role": "user", "content": "My dog Rex comes along, he is a beagle."},
    {"role": "assistant", "content": "Noted, a pet fee applies."},
    {"role": "user", "content": "Which breed is my dog?"},
]


def _recall_call(n: int, query: str) -> dict[str, Any]:
    call = {"id": f"r{n}", "type": "function", "function": {"name": RECALL_TOOL_NAME, "arguments": ""}}
    call["function"]["arguments"] = orjson.dumps({"query": query}).decode()
    usage = {"prompt_tokens": 100, "completion_tokens": 5, "total_tokens": 105}
    return {"choices": [{"message": {"role": "assistant", "content": None, "tool_calls": [call]}}], "usage": usage}


def _answer(text: str) -> dict[str, Any]:
    usage = {"prompt_tokens": 150, "completion_tokens": 7, "total_tokens": 157}
    return {"choices": [{"message": {"role": "assistant", "content": text}}], "usage": usage}


def _sent() -> Forwarded:
    """The request as forwarded before the loop answered anything."""
    return Forwarded(
        request_id="req-1",
        session_id="s",
        created_at=0.0,
        model="m",
        provider="openai",
        caller="caller-a",
        original={},
        assembled={},
    )


def _runtime(tmp_path: Path, **memory: Any) -> MemoryRuntime:
    url = f"sqlite:///{tmp_path / 'store.db'}"
    upgrade(url)
    runtime = MemoryRuntime(parse_settings({"database_url": url, "policy": {"memory": {"mode": "tool", **memory}}}))
    archive(runtime.engine, "caller-a/s", "caller:caller-a", passages_of(HISTORY, 1, 3, 300, COUNTER.text))
    return runtime


def _loop(runtime: MemoryRuntime, scoped: str, outgoing: dict[str, Any]) -> ServedTools:
    tool = recall_tool(runtime, COUNTER, scoped, None, [LOOKUP], outgoing, len(HISTORY))
    assert tool is not None
    return ServedTools(client_tools=[LOOKUP], tools=[tool])


def _scripted(replies: Sequence[dict[str, Any]], sent: list[dict[str, Any]]) -> Any:
    async def send(body: dict[str, Any], raw: bytes | None) -> dict[str, Any]:
        sent.append(body)
        return replies[len(sent) - 1]

    return send


def test_a_recall_call_is_answered_from_the_archive_and_the_usage_summed(tmp_path: Path) -> None:
    runtime, sent = _runtime(tmp_path), []
    outgoing = {"model": "m", "messages": HISTORY[-1:], "tools": [LOOKUP, RECALL_TOOL]}
    loop = _loop(runtime, "caller-a/s", outgoing)
    got = asyncio.run(
        loop.complete(_scripted([_recall_call(1, "dog breed"), _answer("A beagle.")], sent), outgoing, None)
    )
    assert got["choices"][0]["message"]["content"] == "A beagle." and got["usage"]["prompt_tokens"] == 250
    asked, result = sent[1]["messages"][-2:]
    assert asked["tool_calls"][0]["id"] == "r1" and result["tool_call_id"] == "r1"
    assert result["content"].startswith("<recalled") and "beagle" in result["content"]
    record, resent = loop.forwarded(_sent(), COUNTER, Usage(250, 12))
    steps = [(d["pass"], d["action"]) for d in record.decisions]
    assert steps == [("served_tools", "round"), ("recall_memory", "recall_served"), ("served_tools", "round")]
    assert record.assembled == sent[1] and record.assembled_json is None
    # every call is a step with the tokens it sent and what it was billed; the second call is forwarded too
    first, _, second = record.decisions
    assert resent == second["detail"]["prompt_tokens"] == COUNTER.request(sent[1]["messages"], sent[1]["tools"])
    assert first["detail"]["billed"]["prompt_tokens"] == 100 and second["detail"]["billed"]["prompt_tokens"] == 150
    added = sum(d["tokens_after"] - d["tokens_before"] for d in record.decisions)
    assert added == resent  # the handler's decision and the resend's step add up to the second call's prompt
    runtime.close()


def test_another_scope_finds_nothing_and_the_tool_is_dropped_after_max_recalls(tmp_path: Path) -> None:
    runtime, sent = _runtime(tmp_path, max_recalls=1), []
    outgoing = {"model": "m", "messages": HISTORY[-1:], "tools": [LOOKUP, RECALL_TOOL]}
    loop = _loop(runtime, "caller-b/s", outgoing)  # same session name, another caller
    replies = [_recall_call(1, "dog breed"), _answer("I do not know.")]
    asyncio.run(loop.complete(_scripted(replies, sent), outgoing, None))
    assert sent[1]["messages"][-1]["content"] == NOTHING_FOUND
    assert [t["function"]["name"] for t in sent[1]["tools"]] == ["lookup"], "the last recall: tool dropped"
    served = [d for d in loop.forwarded(_sent(), COUNTER, Usage())[0].decisions if d["pass"] == "recall_memory"]
    assert served[0]["detail"]["passages"] == []
    runtime.close()


class _Chunks:
    def __init__(self, payloads: Sequence[dict[str, Any]]) -> None:
        self.payloads = [orjson.dumps(p) for p in payloads]

    async def chunks(self) -> AsyncIterator[bytes]:
        for p in self.payloads:
            yield p

    async def aclose(self) -> None:
        return None


def test_a_streamed_recall_call_is_held_and_replaced_by_the_next_answer(tmp_path: Path) -> None:
    runtime, opened = _runtime(tmp_path), []
    call_delta = {"index": 0, "id": "r9", "function": {"name": RECALL_TOOL_NAME, "arguments": '{"query": "dog'}}
    streams = [
        _Chunks(
            [
                {"choices": [{"delta": {"role": "assistant", "tool_calls": [call_delta]}}]},
                {"choices": [{"delta": {"tool_calls": [{"index": 0, "function": {"arguments": ' breed"}'}}]}}]},
                {"choices": [], "usage": {"prompt_tokens": 100, "completion_tokens": 5, "total_tokens": 105}},
            ]
        ),
        _Chunks(
            [
                {"choices": [{"delta": {"content": "A beagle."}}]},
                {"choices": [], "usage": {"prompt_tokens": 150, "completion_tokens": 7, "total_tokens": 157}},
            ]
        ),
    ]

    async def open_(body: dict[str, Any], raw: bytes | None) -> _Chunks:
        opened.append(body)
        return streams[len(opened) - 1]

    async def relay() -> list[dict[str, Any]]:
        outgoing = {"model": "m", "messages": HISTORY[-1:], "tools": [LOOKUP, RECALL_TOOL]}
        stream = await _loop(runtime, "caller-a/s", outgoing).open_stream(open_, outgoing, None)
        return [orjson.loads(p) async for p in stream.chunks()]

    relayed = asyncio.run(relay())
    assert relayed[0]["choices"][0]["delta"]["content"] == "A beagle." and relayed[-1]["usage"]["prompt_tokens"] == 250
    asked, result = opened[1]["messages"][-2:]
    assert asked["tool_calls"][0]["id"] == "r9" and asked["tool_calls"][0]["function"]["arguments"] == (
        '{"query": "dog breed"}'
    )
    assert result["tool_call_id"] == "r9" and "beagle" in result["content"]
    runtime.close()


def test_a_held_stream_is_reassembled_with_its_call_ids_and_text() -> None:
    payloads = [
        orjson.dumps({"choices": [{"delta": {"content": "Let me check. "}}]}),
        orjson.dumps({"choices": [{"delta": {"tool_calls": [{"index": 0, "id": "a", "function": {"name": "x"}}]}}]}),
    ]
    message, usage = _reassemble(payloads)
    assert message["content"] == "Let me check. " and message["tool_calls"][0]["id"] == "a" and usage is None


def test_the_gateways_own_tool_is_told_apart_from_the_clients_tools_as_sent() -> None:
    """The client's own tool objects, however many, carry no tool of the gateway's (read by identity, no name
    read); one the gateway added is found; a client tool of the same name is the client's."""
    client = [LOOKUP, {"type": "function", "function": {"name": "book", "description": "Book it"}}]
    assert not offers_own({"tools": client}, client, RECALL_TOOL_NAME)
    assert not offers_own({"tools": list(client)}, client, RECALL_TOOL_NAME), "a copy of the list, the same tools"
    assert not offers_own({}, None, RECALL_TOOL_NAME)
    assert offers_own({"tools": [*client, RECALL_TOOL]}, client, RECALL_TOOL_NAME)
    assert offers_own({"tools": [RECALL_TOOL, LOOKUP]}, [LOOKUP, client[1]], RECALL_TOOL_NAME), "pruned and added"
    own_name = {"type": "function", "function": {"name": RECALL_TOOL_NAME, "description": "the client's"}}
    assert not offers_own({"tools": [own_name]}, [own_name], RECALL_TOOL_NAME)
    assert not offers_own({"tools": [{**own_name}]}, [own_name], RECALL_TOOL_NAME), "equal, not the same object"


class _Untouchable:
    """A gateway whose every part fails when read: what steps aside must not ask it anything."""

    def __getattr__(self, name: str) -> Any:
        raise AssertionError(f"the gateway's {name} was read")


def test_a_request_with_none_of_the_gateways_tools_asks_nothing_of_the_gateway() -> None:
    """No tools forwarded, or the client's own tool objects: no loop, and no tool's counter or owner worked out
    (the gateway here fails on any read); with one of the gateway's tools added, the tools are asked."""
    from gateway.edges.edges import Turn
    from gateway.edges.own_tools import own_tools

    client = [LOOKUP]
    bare = Turn("req-1", "caller-a:s", "caller-a", {"messages": HISTORY})
    with_tools = Turn("req-2", "caller-a:s", "caller-a", {"messages": HISTORY, "tools": client})
    gw, model = _Untouchable(), parse_settings({"models": [{"name": "m", "litellm_model": "openai/m"}]}).models[0]
    assert own_tools(gw, model, bare, {"messages": HISTORY}) is None  # type: ignore[arg-type]
    assert own_tools(gw, model, with_tools, {"messages": HISTORY, "tools": list(client)}) is None  # type: ignore[arg-type]
    with pytest.raises(AssertionError, match="was read"):  # a request carrying the gateway's own tool is looked at
        own_tools(gw, model, with_tools, {"messages": HISTORY, "tools": [*client, RECALL_TOOL]})  # type: ignore[arg-type]
