"""The Messages front door end to end: the Anthropic Python SDK, a real gateway and the simulator.

Two kinds of model sit behind one gateway: ``gpt-4o-mini`` (an OpenAI-compatible upstream: the
Messages request is translated to chat and back) and ``claude-sonnet-4-5`` (an Anthropic
upstream: litellm sends the simulator's ``/v1/messages`` the native request the pipeline
assembled, with Ventana's cache breakpoints, and the simulator accounts Anthropic's cache).
The simulator records every body it received, so tests read exactly what the provider saw.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, HTTPServer
from typing import Any, ClassVar

import anthropic
import httpx
import jsonschema
import orjson
import pytest

from gateway.api.auth import hash_key
from gateway.providersim.completion import is_summary_request
from tests.formats.anthropic_schema import COUNT_TOKENS_RESPONSE, ERROR, MESSAGE, REQUEST, check_events, parse_sse
from tests.procs import GatewayHandle, SimHandle, free_port, run_gateway, run_simulator, sim_models

CLAUDE = "claude-sonnet-4-5"
SMALL_CLAUDE = "claude-small-window"
SIM_KEY_ENV = "VENTANA_TEST_SIM_ANTHROPIC_KEY"
WEATHER = {
    "name": "get_weather",
    "description": "Current weather for a city",
    "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
}
TOPICS = [f"ledger_{i:02d}" for i in range(30)]  # more than tools.max_tools (16)
LONG_SYSTEM = "You are a meticulous assistant. Always cite the tool output you rely on. " * 120  # ~1,700 tokens


def claude_models(sim_url: str) -> list[dict[str, Any]]:
    """Anthropic models whose upstream is the simulator's /v1/messages (litellm appends the path)."""
    base = {"litellm_model": f"anthropic/{CLAUDE}", "api_base": sim_url, "api_key_env": SIM_KEY_ENV}
    return [
        {"name": CLAUDE, "context_window": 200_000, **base},
        {"name": SMALL_CLAUDE, "context_window": 8000, **base},
    ]


@pytest.fixture(scope="module")
def msim(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SimHandle]:
    with run_simulator(tmp_path_factory.mktemp("sim-messages")) as handle:
        yield handle


@pytest.fixture(scope="module")
def gw(msim: SimHandle, tmp_path_factory: pytest.TempPathFactory) -> Iterator[GatewayHandle]:
    config = {
        "models": sim_models(msim.base_url) + claude_models(msim.url),
        "policy": {"compaction": {"summary_max_tokens": 500, "keep_recent_turns": 2, "strategies": ["summarize"]}},
    }
    env = {SIM_KEY_ENV: "sk-sim-anthropic", "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    with run_gateway(tmp_path_factory.mktemp("gw-messages"), config, env=env) as handle:
        yield handle


def _client(gw: GatewayHandle, key: str = "sk-client") -> Any:
    """The SDK client, typed loosely: its overloads name Anthropic's models, not the gateway's."""
    return anthropic.Anthropic(base_url=gw.url, api_key=key, max_retries=0)


def _answered(sim: SimHandle) -> list[dict[str, Any]]:
    return [b for b in sim.received() if not is_summary_request(b.get("messages") or [])]


def test_create_answers_through_the_chat_pipeline(gw: GatewayHandle, msim: SimHandle) -> None:
    msim.reset()
    raw = _client(gw).messages.with_raw_response.create(
        model="gpt-4o-mini",
        max_tokens=64,
        system="Answer briefly.",
        messages=[{"role": "user", "content": "What is the capital of Peru?"}],
        stop_sequences=["###"],
        metadata={"user_id": "u-1"},
        extra_headers={"x-session-id": "create-1", "anthropic-beta": "prompt-caching-2024-07-31"},
    )
    jsonschema.validate(raw.http_response.json(), MESSAGE)  # the bytes on the wire, not the SDK's model
    message = raw.parse()
    assert message.content[0].type == "text"
    assert message.content[0].text.endswith("to: What is the capital of Peru?")
    assert message.stop_reason == "end_turn" and message.model == "gpt-4o-mini"
    (forwarded,) = _answered(msim)
    assert forwarded["messages"][0]["role"] == "system" and forwarded["stop"] == ["###"] and forwarded["user"] == "u-1"
    assert message.usage.input_tokens > 0 and message.usage.output_tokens > 0


def test_stream_events_follow_the_documented_sequence_and_match_create(gw: GatewayHandle) -> None:
    request = {"model": "gpt-4o-mini", "max_tokens": 64, "messages": [{"role": "user", "content": "Stream, please."}]}
    with httpx.stream("POST", gw.url + "/v1/messages", json={**request, "stream": True}, timeout=30) as response:
        assert response.status_code == 200 and response.headers["content-type"].startswith("text/event-stream")
        events = parse_sse(response.read())
    check_events(events)
    assert "ping" in [e["type"] for e in events]
    client = _client(gw)
    with client.messages.stream(**request) as stream:
        final = stream.get_final_message()
    whole = client.messages.create(**request)
    assert final.content[0].text == whole.content[0].text
    assert final.usage.output_tokens == whole.usage.output_tokens


def test_a_tool_round_trip_keeps_every_call_with_its_result(gw: GatewayHandle, msim: SimHandle) -> None:
    msim.reset()
    client = _client(gw)
    messages: list[dict[str, Any]] = [{"role": "user", "content": "Weather in Lima?"}]
    first = client.messages.create(
        model="gpt-4o-mini",
        max_tokens=64,
        tools=[WEATHER],
        tool_choice={"type": "any"},
        messages=messages,
    )
    assert first.stop_reason == "tool_use"
    (call,) = [b for b in first.content if b.type == "tool_use"]
    assert call.name == "get_weather" and call.input == {"city": "example"}
    messages += [
        {"role": "assistant", "content": [b.model_dump(exclude_none=True) for b in first.content]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": call.id, "content": "18 C, cloudy"}]},
    ]
    with client.messages.stream(model="gpt-4o-mini", max_tokens=64, tools=[WEATHER], messages=messages) as stream:
        second = stream.get_final_message()
    assert second.stop_reason == "end_turn" and second.content[0].type == "text"
    forwarded = _answered(msim)[-1]["messages"]
    assert [m["role"] for m in forwarded][-3:] == ["user", "assistant", "tool"]
    calls = {c["id"] for m in forwarded for c in m.get("tool_calls") or ()}
    results = {m["tool_call_id"] for m in forwarded if m["role"] == "tool"}
    assert calls == results == {call.id}


def test_count_tokens_counts_what_the_provider_bills(gw: GatewayHandle) -> None:
    client = _client(gw)
    request: dict[str, Any] = {
        "model": "gpt-4o-mini",
        "system": "Count me.",
        "messages": [{"role": "user", "content": "How many tokens is this sentence, including the system prompt?"}],
        "tools": [WEATHER],
    }
    counted = client.messages.count_tokens(**request)
    jsonschema.validate(counted.model_dump(), COUNT_TOKENS_RESPONSE)
    answered = client.messages.create(max_tokens=16, **request)
    usage = answered.usage
    assert counted.input_tokens == usage.input_tokens + (usage.cache_read_input_tokens or 0)


@pytest.mark.parametrize(
    ("body", "status", "kind"),
    [
        (
            {"model": "no-such-model", "max_tokens": 5, "messages": [{"role": "user", "content": "x"}]},
            404,
            "not_found_error",
        ),
        ({"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "x"}]}, 400, "invalid_request_error"),
        (
            {"model": "gpt-4o-mini", "max_tokens": 5, "messages": [{"role": "tool", "content": "x"}]},
            400,
            "invalid_request_error",
        ),
    ],
)
def test_errors_leave_in_anthropics_shape(gw: GatewayHandle, body: dict[str, Any], status: int, kind: str) -> None:
    response = httpx.post(gw.url + "/v1/messages", json=body, timeout=30)
    assert response.status_code == status
    jsonschema.validate(response.json(), ERROR)
    assert response.json()["error"]["type"] == kind


def test_the_sdk_raises_its_own_error_types(gw: GatewayHandle) -> None:
    with pytest.raises(anthropic.NotFoundError) as raised:
        _client(gw).messages.create(model="no-such-model", max_tokens=5, messages=[{"role": "user", "content": "x"}])
    assert "no-such-model" in raised.value.message


def test_x_api_key_is_the_gateway_key(msim: SimHandle, tmp_path_factory: pytest.TempPathFactory) -> None:
    config = {"models": sim_models(msim.base_url), "auth": {"enabled": True, "keys": [hash_key("vk-messages")]}}
    with run_gateway(tmp_path_factory.mktemp("gw-messages-auth"), config) as authed:
        ok = _client(authed, "vk-messages").messages.create(
            model="gpt-4o-mini", max_tokens=5, messages=[{"role": "user", "content": "x"}]
        )
        assert ok.content[0].type == "text"
        with pytest.raises(anthropic.AuthenticationError) as raised:
            _client(authed, "vk-wrong").messages.create(
                model="gpt-4o-mini", max_tokens=5, messages=[{"role": "user", "content": "x"}]
            )
        jsonschema.validate(raised.value.body, ERROR)


def _breakpoints(body: dict[str, Any]) -> int:
    """cache_control markers in a native Messages request (system blocks, content blocks, tools)."""
    system = body.get("system")
    blocks: list[dict[str, Any]] = [*(system if isinstance(system, list) else []), *body.get("tools", [])]
    for m in body["messages"]:
        blocks += m["content"] if isinstance(m["content"], list) else []
    return sum(1 for b in blocks if b.get("cache_control"))


def test_anthropic_upstreams_get_native_requests_with_breakpoints_and_cache_reads(
    gw: GatewayHandle, msim: SimHandle
) -> None:
    msim.reset()
    client = _client(gw)
    usages = []
    for turn in range(3):
        answered = client.messages.create(
            model=CLAUDE,
            max_tokens=64,
            system=LONG_SYSTEM,
            messages=[{"role": "user", "content": f"Question number {turn}?"}],
            extra_headers={"x-session-id": f"native-{turn}"},
        )
        usages.append(answered.usage)
    received = _answered(msim)
    assert len(received) == 3
    for body in received:
        jsonschema.validate(body, REQUEST)  # litellm's native request is a valid Messages request
        assert 1 <= _breakpoints(body) <= 4
    assert usages[0].cache_creation_input_tokens and not usages[0].cache_read_input_tokens
    assert usages[1].cache_read_input_tokens and usages[2].cache_read_input_tokens
    assert usages[1].cache_read_input_tokens >= 1024  # the system prompt, cached at Ventana's breakpoint


@pytest.mark.parametrize(
    ("client_marks", "expected"),
    [
        ({"tools", "first"}, 4),  # the gateway adds the static prefix and the latest message
        ({"system", "last"}, 2),  # its places are taken: nothing is added, nothing moved
        ({"tools", "first", "system", "last"}, 4),  # no room: the client's four stay, no fifth
    ],
)
def test_client_breakpoints_are_kept_and_never_multiplied_past_four(
    gw: GatewayHandle, msim: SimHandle, client_marks: set[str], expected: int
) -> None:
    msim.reset()

    def mark(where: str) -> dict[str, Any]:
        return {"cache_control": {"type": "ephemeral"}} if where in client_marks else {}

    messages: list[dict[str, Any]] = [
        {"role": "user", "content": [{"type": "text", "text": "first", **mark("first")}]},
        {"role": "assistant", "content": "noted"},
        {"role": "user", "content": [{"type": "text", "text": "second", **mark("last")}]},
    ]
    _client(gw).messages.create(
        model=CLAUDE,
        max_tokens=16,
        system=[{"type": "text", "text": LONG_SYSTEM, **mark("system")}],
        tools=[{**WEATHER, **mark("tools")}],
        messages=messages,
    )
    (body,) = _answered(msim)
    assert _breakpoints(body) == expected
    assert body["system"][0].get("cache_control") and body["messages"][-1]["content"][-1].get("cache_control")
    if "tools" in client_marks:
        assert body["tools"][0].get("cache_control")
    if "first" in client_marks:
        assert body["messages"][0]["content"][0].get("cache_control")


def _result_text(turn: int) -> str:
    rows = "\n".join(
        f"row {turn}-{i}: station {i} reads {turn * 7 + i} mm, status ok, checked at 0{i}:00" for i in range(8)
    )
    return f"Readings for batch {turn}:\n{rows}"


def test_a_long_tool_loop_is_compacted_and_keeps_every_pair(
    gw: GatewayHandle, msim: SimHandle, capsys: pytest.CaptureFixture[str]
) -> None:
    msim.reset()
    client = _client(gw)
    messages: list[dict[str, Any]] = [{"role": "user", "content": "Collect every station reading, batch by batch."}]
    usages = []
    for turn in range(40):
        answered = client.messages.create(
            model=SMALL_CLAUDE,
            max_tokens=64,
            system="You are a data collector. Never invent readings.",
            tools=[WEATHER],
            tool_choice={"type": "any"},
            messages=messages,
            extra_headers={"x-session-id": "long-loop"},
        )
        usages.append(answered.usage)
        (call,) = [b for b in answered.content if b.type == "tool_use"]
        messages += [
            {"role": "assistant", "content": [b.model_dump(exclude_none=True) for b in answered.content]},
            {
                "role": "user",
                "content": [
                    {"type": "tool_result", "tool_use_id": call.id, "content": _result_text(turn)},
                    # As Claude Code does, the result turn carries text: compaction counts turns by
                    # user messages, and a turn of tool results alone is a chat `tool` message.
                    {"type": "text", "text": f"Go on with batch {turn + 1}."},
                ],
            },
        ]
    received = _answered(msim)
    assert len(received) == 40
    for body in received:
        jsonschema.validate(body, REQUEST)
        assert _breakpoints(body) <= 4
        for i, m in enumerate(body["messages"]):
            uses = [b["id"] for b in m["content"] if isinstance(m["content"], list) and b["type"] == "tool_use"]
            if uses:
                following = body["messages"][i + 1]["content"]
                assert {b["tool_use_id"] for b in following if b["type"] == "tool_result"} == set(uses)
    compacted = [i for i, b in enumerate(received) if "<summary" in str(b["messages"])]
    assert compacted, "40 turns of ~250 tokens must cross 55% of an 8,000-token window"
    full = len(str(messages))
    assert len(str(received[-1]["messages"])) < full / 2
    read = sum(u.cache_read_input_tokens or 0 for u in usages)
    total = sum(
        u.input_tokens + (u.cache_read_input_tokens or 0) + (u.cache_creation_input_tokens or 0) for u in usages
    )
    with capsys.disabled():
        print(f"\nlong Messages tool loop: compacted from turn {compacted[0]}, cache-read share {read / total:.1%}")
    assert read / total > 0.3


def test_a_stream_that_fails_midway_ends_with_an_error_event(gw: GatewayHandle, msim: SimHandle) -> None:
    msim.reset()
    msim.faults({"kind": "malformed", "times": 1})
    request = {
        "model": "gpt-4o-mini",
        "max_tokens": 64,
        "stream": True,
        "messages": [{"role": "user", "content": "Fail later."}],
    }
    with httpx.stream("POST", gw.url + "/v1/messages", json=request, timeout=30) as response:
        events = parse_sse(response.read())
    check_events(events)
    assert events[-1]["type"] == "error" and events[-1]["error"]["type"] == "api_error"
    text = "".join(e["delta"].get("text", "") for e in events if e["type"] == "content_block_delta")
    assert text.startswith("Simulated answer")


def test_a_provider_rejection_keeps_its_status_in_anthropics_shape(gw: GatewayHandle, msim: SimHandle) -> None:
    msim.reset()
    msim.faults({"kind": "status", "status": 400, "times": 1})
    with pytest.raises(anthropic.BadRequestError) as raised:
        _client(gw).messages.create(model="gpt-4o-mini", max_tokens=5, messages=[{"role": "user", "content": "x"}])
    jsonschema.validate(raised.value.body, ERROR)


def test_defer_loading_mode_sends_every_tool_and_the_providers_tool_search(
    msim: SimHandle, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """With ``tools.modes: {anthropic: defer_loading}`` nothing is pruned: the unselected tools are deferred."""
    msim.reset()
    tools = [WEATHER] + [
        {
            "name": f"manage_{topic}",
            "description": f"Create, list and delete {topic} records in the back office",
            "input_schema": {"type": "object", "properties": {"id": {"type": "string"}}},
        }
        for topic in TOPICS
    ]
    config = {"models": claude_models(msim.url), "policy": {"tools": {"modes": {"anthropic": "defer_loading"}}}}
    env = {SIM_KEY_ENV: "sk-sim-anthropic", "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    with run_gateway(tmp_path_factory.mktemp("gw-messages-defer"), config, env=env) as deferring:
        _client(deferring).messages.create(
            model=CLAUDE, max_tokens=16, tools=tools, messages=[{"role": "user", "content": "Weather in Lima today?"}]
        )
    (body,) = _answered(msim)
    jsonschema.validate(body, REQUEST)
    names = {t["name"]: t for t in body["tools"]}
    assert set(names) >= {t["name"] for t in tools}
    assert not names["get_weather"].get("defer_loading")
    assert sum(1 for t in body["tools"] if t.get("defer_loading")) >= len(tools) // 2
    assert any(str(t.get("type", "")).startswith("tool_search_tool") for t in body["tools"])


def test_thinking_blocks_reach_an_anthropic_upstream_untouched(gw: GatewayHandle, msim: SimHandle) -> None:
    msim.reset()
    turn = [
        {"type": "thinking", "thinking": "I need the tool.", "signature": "sig-abc"},
        {"type": "redacted_thinking", "data": "opaque-bytes"},
        {"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {"city": "Lima"}},
    ]
    thinking = {"type": "enabled", "budget_tokens": 1024}
    _client(gw).messages.create(
        model=CLAUDE,
        max_tokens=2000,
        thinking=thinking,
        tools=[WEATHER],
        messages=[
            {"role": "user", "content": "Weather?"},
            {"role": "assistant", "content": turn},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "18 C"}]},
        ],
    )
    (body,) = _answered(msim)
    assert body["messages"][1]["content"] == turn and body["thinking"] == thinking


class _HeaderCapture(BaseHTTPRequestHandler):
    """A one-route Anthropic upstream that keeps the headers it was sent (the simulator keeps bodies)."""

    seen: ClassVar[list[dict[str, str]]] = []

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("content-length", 0)))
        self.seen.append({k.lower(): v for k, v in self.headers.items()})
        message = {"id": "msg_1", "type": "message", "role": "assistant", "model": CLAUDE, "stop_sequence": None}
        message |= {"content": [{"type": "text", "text": "hi"}], "stop_reason": "end_turn"}
        out = orjson.dumps({**message, "usage": {"input_tokens": 3, "output_tokens": 1}})
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(out)))
        self.end_headers()
        self.wfile.write(out)

    def log_message(self, *args: Any) -> None:
        return None


def test_anthropic_beta_reaches_a_claude_upstream(tmp_path_factory: pytest.TempPathFactory) -> None:
    port = free_port()
    server = HTTPServer(("127.0.0.1", port), _HeaderCapture)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        model = {"name": CLAUDE, "litellm_model": f"anthropic/{CLAUDE}", "api_base": f"http://127.0.0.1:{port}"}
        config = {"models": [{**model, "api_key_env": SIM_KEY_ENV}]}
        env = {SIM_KEY_ENV: "sk-sim-anthropic", "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
        with run_gateway(tmp_path_factory.mktemp("gw-messages-beta"), config, env=env) as beta_gw:
            _client(beta_gw).messages.create(
                model=CLAUDE,
                max_tokens=5,
                messages=[{"role": "user", "content": "x"}],
                extra_headers={"anthropic-beta": "interleaved-thinking-2025-05-14"},
            )
    finally:
        server.shutdown()
    (headers,) = _HeaderCapture.seen
    assert "interleaved-thinking-2025-05-14" in headers["anthropic-beta"].split(",")


def test_structured_output_crosses_as_a_response_format(gw: GatewayHandle, msim: SimHandle) -> None:
    """anthropic 2.x's ``output_config.format`` (a JSON schema the answer follows) reaches a chat upstream as
    ``response_format``: the answer is JSON in that schema, not free text."""
    msim.reset()
    schema = {
        "type": "object",
        "properties": {"city": {"type": "string"}, "population": {"type": "integer"}},
        "required": ["city", "population"],
        "additionalProperties": False,
    }
    message = _client(gw).messages.create(
        model="gpt-4o-mini",
        max_tokens=128,
        messages=[{"role": "user", "content": "Give me the largest city of Peru as JSON."}],
        output_config={"format": {"type": "json_schema", "schema": schema}},
    )
    (forwarded,) = _answered(msim)
    assert forwarded["response_format"] == {"type": "json_schema", "json_schema": {"name": "output", "schema": schema}}
    jsonschema.validate(orjson.loads(message.content[0].text), schema)
    with pytest.raises(anthropic.BadRequestError) as refused:
        _client(gw).messages.create(
            model="gpt-4o-mini",
            max_tokens=16,
            messages=[{"role": "user", "content": "x"}],
            output_config={"format": {"type": "regex", "pattern": ".*"}},
        )
    assert "output_config.format" in refused.value.message


def test_automatic_caching_takes_one_of_the_four_breakpoints(gw: GatewayHandle, msim: SimHandle) -> None:
    """A top-level ``cache_control`` (automatic caching, anthropic 2.x) stays, and the gateway's own markers
    leave room for it: with three of the client's own, the gateway adds none (before: a fifth)."""
    msim.reset()
    marker = {"cache_control": {"type": "ephemeral"}}
    messages: list[dict[str, Any]] = [
        {"role": "user", "content": [{"type": "text", "text": "first", **marker}]},
        {"role": "assistant", "content": "noted"},
        {"role": "user", "content": [{"type": "text", "text": "second"}]},
    ]
    _client(gw).messages.create(
        model=CLAUDE,
        max_tokens=16,
        system=[{"type": "text", "text": LONG_SYSTEM, **marker}],
        tools=[{**WEATHER, **marker}],
        messages=messages,
        cache_control={"type": "ephemeral"},
    )
    (body,) = _answered(msim)
    assert body.get("cache_control") == {"type": "ephemeral"}
    assert _breakpoints(body) == 3, "three of the client's, none added beside the automatic one"
    msim.reset()
    _client(gw).messages.create(
        model=CLAUDE, max_tokens=16, system=LONG_SYSTEM, messages=messages[2:], cache_control={"type": "ephemeral"}
    )
    (body,) = _answered(msim)
    assert 1 <= _breakpoints(body) <= 3, "the gateway still places its own, within three"
