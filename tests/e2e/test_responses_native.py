"""Native Responses forwarding: an upstream that speaks Responses gets the client's own body.

The simulator's Responses route records the body it received as it came, so each test compares,
field by field, what the client sent with what reached the upstream: equal except the gateway's
documented edits (docs/responses.md, "Native forwarding"). Before native forwarding the upstream
got a Chat Completions translation that had lost ``reasoning``, ``include``, ``store``,
``client_metadata``, hosted tools and every item id.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import httpx
import openai
import orjson
import pytest

from gateway.assembly.render_reminder import parse_reminder
from tests.procs import GatewayHandle, SimHandle, run_gateway, sim_models

CODEX_FIRST = Path(__file__).resolve().parent.parent / "formats" / "data" / "codex_0171_first_request.json"
#: Fields the gateway may set or change (docs/responses.md): the model id, the conversation of a
#: previous_response_id, the input and tools it edits, and the cache key when the client sent none.
EDITED = {"model", "input", "tools", "instructions", "previous_response_id", "prompt_cache_key", "tool_choice"}


@pytest.fixture(scope="module")
def native_gateway(sim: SimHandle, tmp_path_factory: pytest.TempPathFactory) -> Iterator[GatewayHandle]:
    # Tool selection as OpenAI's own restriction (allowed_tools): the gateway's find_tools loop answers
    # chat only, so a request it would serve crosses to chat (docs/responses.md).
    config = {
        "models": sim_models(sim.base_url, wire_api="responses"),
        "policy": {"tools": {"modes": {"openai": "allowed_tools"}}},
    }
    with run_gateway(tmp_path_factory.mktemp("gw-native"), config) as handle:
        yield handle


@pytest.fixture(scope="module")
def native_default_gateway(sim: SimHandle, tmp_path_factory: pytest.TempPathFactory) -> Iterator[GatewayHandle]:
    """The bundled policy: tool selection would prune and serve find_tools, which a native request cannot."""
    config = {"models": sim_models(sim.base_url, wire_api="responses")}
    with run_gateway(tmp_path_factory.mktemp("gw-native-default"), config) as handle:
        yield handle


def _input_items(given: Any) -> list[Any]:
    return given if isinstance(given, list) else [{"role": "user", "content": given}]


def assert_only_documented_edits(sent: Mapping[str, Any], received: Mapping[str, Any]) -> None:
    """``received`` is ``sent`` except the documented edits, each checked for what it may change."""
    for key in set(sent) | set(received):
        if key not in EDITED:
            assert key in sent and key in received, f"{key!r} was lost or added"
            assert received[key] == sent[key], f"{key!r} changed: {sent[key]!r} -> {received[key]!r}"
    if "prompt_cache_key" in sent:
        assert received["prompt_cache_key"] == sent["prompt_cache_key"], "the client's cache key is the client's"
    if "tools" in sent:  # selection only: every tool sent on is one of the client's, verbatim, in its order
        kept = [t for t in sent["tools"] if t in received.get("tools", [])]
        assert received.get("tools", []) == kept, "a forwarded tool is not the client's own object"
    items, given = _input_items(received["input"]), _input_items(sent["input"])
    assert items[: len(given)] == given, "the client's items must arrive verbatim and in order"
    for extra in items[len(given) :]:  # only the gateway's trailing reminder may follow them
        assert extra.get("role") == "user" and parse_reminder(extra.get("content")) is not None, extra
    if "instructions" in sent:
        assert "instructions" in received
    choice = received.get("tool_choice")
    if choice != sent.get("tool_choice"):  # selection as OpenAI's restriction, in the Responses form
        assert choice["type"] == "allowed_tools" and choice["mode"] in ("auto", "required"), choice
        offered = {t.get("name") for t in received["tools"]} | {
            inner.get("name") for t in received["tools"] if t.get("type") == "namespace" for inner in t["tools"]
        }
        assert all(t["type"] == "function" and t["name"] in offered for t in choice["tools"]), choice


def test_codex_first_request_reaches_the_upstream_as_codex_sent_it(
    native_gateway: GatewayHandle, sim: SimHandle
) -> None:
    sent = orjson.loads(CODEX_FIRST.read_bytes())
    sim.reset()
    with httpx.stream("POST", native_gateway.base_url + "/responses", json=sent, timeout=60) as answer:
        assert answer.status_code == 200, answer.read()
        events = [line for line in answer.iter_lines() if line.startswith("event: ")]
    assert events[0] == "event: response.created" and events[-1] == "event: response.completed"
    received = sim.received()[-1]
    assert "messages" not in received, "the upstream got a chat translation, not the client's body"
    assert_only_documented_edits(sent, received)
    # what the chat translation used to lose, named one by one
    for key in ("reasoning", "include", "store", "client_metadata", "parallel_tool_calls"):
        assert received[key] == sent[key], key
    assert {"type": "web_search"} in received["tools"] or any(t["type"] == "web_search" for t in received["tools"])


def test_reasoning_include_and_unknown_fields_pass_through(native_gateway: GatewayHandle, sim: SimHandle) -> None:
    client = openai.OpenAI(base_url=native_gateway.base_url, api_key="sk-native")
    conversation: list[dict[str, Any]] = [
        {"role": "developer", "content": "Answer briefly."},
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "What is 2+2?"}]},
        {"type": "reasoning", "id": "rs_1", "summary": [], "encrypted_content": "gAAAA-opaque"},
        {"type": "message", "role": "assistant", "id": "msg_1", "content": [{"type": "output_text", "text": "4"}]},
        {"role": "user", "content": "And 3+3?"},
    ]
    extra = {"reasoning": {"effort": "low", "summary": "auto"}, "include": ["reasoning.encrypted_content"]}
    sent = {
        "model": "gpt-4o-mini",
        "input": conversation,
        "store": False,
        "text": {"verbosity": "low"},
        "metadata": {"ticket": "T-1"},
        "truncation": "auto",
        "future_field": {"nested": [1, 2]},
        **extra,
    }
    sim.reset()
    raw = client.responses.with_raw_response.create(
        model="gpt-4o-mini",
        input=conversation,  # type: ignore[arg-type]
        store=False,
        text={"verbosity": "low"},
        metadata={"ticket": "T-1"},
        truncation="auto",
        reasoning={"effort": "low", "summary": "auto"},
        include=["reasoning.encrypted_content"],
        extra_body={"future_field": {"nested": [1, 2]}},
    )
    answer = raw.parse()
    assert answer.output_text
    assert raw.headers["x-ventana-request-id"]
    received = sim.received()[-1]
    assert_only_documented_edits(sent, received)
    assert received["input"][2] == conversation[2], "a reasoning item goes on with its encrypted content"


def test_previous_response_id_is_answered_from_the_gateway_and_sent_as_the_whole_input(
    native_gateway: GatewayHandle, sim: SimHandle
) -> None:
    client = openai.OpenAI(base_url=native_gateway.base_url, api_key="sk-native-chain")
    first = client.responses.create(model="gpt-4o-mini", input="My name is Ana.", reasoning={"effort": "low"})
    sim.reset()
    second = client.responses.create(model="gpt-4o-mini", previous_response_id=first.id, input="My name?")
    assert second.output_text
    received = sim.received()[-1]
    assert "previous_response_id" not in received
    texts = orjson.dumps(received["input"]).decode()
    assert "My name is Ana." in texts and "My name?" in texts
    assert client.responses.retrieve(second.id).id == second.id


def test_with_the_bundled_policy_codex_goes_natively_with_its_tools_untouched(
    native_default_gateway: GatewayHandle, sim: SimHandle
) -> None:
    sent = orjson.loads(CODEX_FIRST.read_bytes())
    sim.reset()
    with httpx.stream("POST", native_default_gateway.base_url + "/responses", json=sent, timeout=60) as answer:
        assert answer.status_code == 200, answer.read()
        assert "x-ventana-untranslated" not in answer.headers
        answer.read()
    received = sim.received()[-1]
    assert "messages" not in received
    assert_only_documented_edits(sent, received)
    assert received["tools"] == sent["tools"] and received["tool_choice"] == sent["tool_choice"]


def test_a_chat_upstream_names_the_fields_that_could_not_cross(default_gateway: GatewayHandle) -> None:
    body = {
        "model": "gpt-4o-mini",
        "input": "hi",
        "include": ["reasoning.encrypted_content"],
        "reasoning": {"effort": "low", "summary": "auto"},
        "truncation": "auto",
    }
    answer = httpx.post(default_gateway.base_url + "/responses", json=body, timeout=60)
    assert answer.status_code == 200, answer.text
    assert answer.headers["x-ventana-untranslated"] == "include,truncation,reasoning.summary"


def test_a_stream_the_provider_drops_ends_with_error_then_response_failed(
    native_gateway: GatewayHandle, sim: SimHandle
) -> None:
    sim.faults({"kind": "drop_stream", "times": 1})
    body = {"model": "gpt-4o-mini", "input": "a long answer, please", "stream": True}
    with httpx.stream("POST", native_gateway.base_url + "/responses", json=body, timeout=60) as answer:
        assert answer.status_code == 200
        events = [orjson.loads(line[6:]) for line in answer.iter_lines() if line.startswith("data: ")]
    kinds = [e["type"] for e in events]
    assert kinds[-2:] == ["error", "response.failed"], kinds
    assert "response.output_text.delta" in kinds, "text sent before the drop was relayed"
    assert events[-1]["response"]["status"] == "failed"
    assert events[-1]["response"]["error"]["code"] == "server_error"
    assert events[-1]["response"]["id"] == events[0]["response"]["id"]
    numbers = [e["sequence_number"] for e in events]
    assert numbers == sorted(numbers) and len(set(numbers)) == len(numbers)
