"""Native forwarding on ``/v1/messages``: what an Anthropic upstream receives is what the client sent.

The gateway runs every pass on a chat-shaped view and applies their edits to the client's own
Messages body, so the simulator's Messages route (behind an ``anthropic/`` model) records the
client's request field by field, except the documented edits (cache breakpoints, volatile values
moved to the trailing reminder, tool selection, compaction). Before native forwarding the same
request was refused (system-role messages, server tools) or rewritten by litellm (adaptive
thinking, ``context_management`` and ``output_config`` lost, ``tool_reference`` emptied).
"""

from __future__ import annotations

import difflib
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anthropic
import httpx
import orjson
import pytest

from gateway.providersim.completion import is_summary_request
from tests.e2e.test_messages_sdk import CLAUDE, SIM_KEY_ENV, claude_models
from tests.procs import GatewayHandle, SimHandle, run_gateway, run_simulator, sim_models

AGENT = "ventana-agent"
BETA = "mid-conversation-system-2026-04-07,context-management-2025-06-27"
CRON = {
    "name": "CronCreate",
    "description": "Schedule a prompt, e.g. every day at 2:30pm.",
    "input_schema": {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "type": "object",
        "properties": {"cron": {"type": "string"}, "prompt": {"type": "string"}},
        "required": ["cron", "prompt"],
        "additionalProperties": False,
    },
    "defer_loading": True,
}
READ = {
    "name": "Read",
    "description": "Reads a file from the local filesystem.",
    "input_schema": {"type": "object", "properties": {"file_path": {"type": "string"}}, "required": ["file_path"]},
}
#: An Anthropic SDK request with what today's clients send: adaptive thinking, context editing,
#: effort, server tools and their result blocks, tool search results and ``tool_reference``
#: blocks, citations, ``search_result`` and document blocks, ``is_error``, a system-role
#: message, and fields and blocks this gateway has never heard of.
REQUEST: dict[str, Any] = {
    "model": CLAUDE,
    "max_tokens": 4096,
    "system": [{"type": "text", "text": "You are a careful engineer. Never push to main without review."}],
    "messages": [
        {"role": "user", "content": "Schedule the nightly report and check the web for the cron syntax."},
        {"role": "system", "content": "The user prefers UTC times."},
        {
            "role": "assistant",
            "content": [
                {"type": "thinking", "thinking": "I need the cron tool first.", "signature": "EqQBCkYIBxgCKkA"},
                {
                    "type": "server_tool_use",
                    "id": "srvtoolu_01",
                    "name": "tool_search_tool_regex",
                    "input": {"query": "cron"},
                },
                {
                    "type": "tool_search_tool_result",
                    "tool_use_id": "srvtoolu_01",
                    "content": {
                        "type": "tool_search_tool_search_result",
                        "tool_references": [{"type": "tool_reference", "tool_name": "CronCreate"}],
                    },
                },
                {"type": "server_tool_use", "id": "srvtoolu_02", "name": "web_search", "input": {"query": "cron"}},
                {
                    "type": "web_search_tool_result",
                    "tool_use_id": "srvtoolu_02",
                    "content": [
                        {
                            "type": "web_search_result",
                            "url": "https://example.org/cron",
                            "title": "Cron syntax",
                            "encrypted_content": "EqgfCioIARgBIiQ3",
                            "page_age": "2 days ago",
                        }
                    ],
                },
                {
                    "type": "text",
                    "text": "Cron has five fields.",
                    "citations": [
                        {
                            "type": "web_search_result_location",
                            "url": "https://example.org/cron",
                            "title": "Cron syntax",
                            "encrypted_index": "Eo8BCioIAhgB",
                            "cited_text": "five fields",
                        }
                    ],
                },
                {"type": "tool_use", "id": "toolu_01", "name": "Read", "input": {"file_path": "/srv/report.cfg"}},
            ],
        },
        {
            "role": "user",
            "content": [
                {
                    "type": "tool_result",
                    "tool_use_id": "toolu_01",
                    "is_error": True,
                    "content": [
                        {"type": "text", "text": "permission denied"},
                        {"type": "tool_reference", "tool_name": "CronCreate"},
                    ],
                },
                {
                    "type": "search_result",
                    "source": "https://wiki.example/cron",
                    "title": "Team cron notes",
                    "content": [{"type": "text", "text": "Reports run at 02:00 UTC."}],
                    "citations": {"enabled": True},
                },
                {
                    "type": "document",
                    "source": {"type": "text", "media_type": "text/plain", "data": "nightly: 0 2 * * *"},
                    "title": "crontab",
                    "citations": {"enabled": True},
                },
                {"type": "future_block_kind", "payload": {"x": 1}},
                {"type": "text", "text": "Now schedule it."},
            ],
        },
    ],
    "tools": [
        READ,
        CRON,
        {"type": "web_search_20250305", "name": "web_search", "max_uses": 3},
        {"type": "tool_search_tool_regex_20251119", "name": "tool_search_tool_regex"},
    ],
    "tool_choice": {"type": "auto"},
    "thinking": {"type": "adaptive"},
    "context_management": {
        "edits": [
            {"type": "clear_tool_uses_20250919", "trigger": {"type": "input_tokens", "value": 30000}},
            {"type": "clear_thinking_20251015", "keep": "all"},
        ]
    },
    "output_config": {"effort": "medium"},
    "metadata": {"user_id": '{"device_id":"d1","account_uuid":"","session_id":"5e55-1000-aaaa"}'},
    "a_field_from_next_year": {"keep": ["me", 1, None]},
}


@pytest.fixture(scope="module")
def sim(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SimHandle]:
    with run_simulator(tmp_path_factory.mktemp("sim-native")) as handle:
        yield handle


@pytest.fixture(scope="module")
def gw(sim: SimHandle, tmp_path_factory: pytest.TempPathFactory) -> Iterator[GatewayHandle]:
    agent = {**claude_models(sim.url)[0], "name": AGENT}  # no Claude id: Claude Code then sends system messages
    config = {"models": sim_models(sim.base_url) + claude_models(sim.url) + [agent]}
    env = {SIM_KEY_ENV: "sk-sim-anthropic", "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    with run_gateway(tmp_path_factory.mktemp("gw-native"), config, env=env) as handle:
        yield handle


def _without_markers(value: Any) -> Any:
    """``value`` without ``cache_control``: the gateway's breakpoints are a documented edit (a string
    content that gets one becomes a single text block, so one text block reads as that string)."""
    if isinstance(value, dict):
        out = {k: _without_markers(v) for k, v in value.items() if k != "cache_control"}
        for key in ("content", "system"):
            found = out.get(key)
            if isinstance(found, list) and len(found) == 1 and found[0].keys() == {"type", "text"}:
                out[key] = found[0]["text"]
        return out
    if isinstance(value, list):
        return [_without_markers(v) for v in value]
    return value


def _reminders(messages: list[Any]) -> tuple[list[Any], str]:
    """The messages without the gateway's trailing ``<reminder>`` turn, and that turn's text."""
    last = messages[-1] if messages else {}
    text = last.get("content") if isinstance(last.get("content"), str) else ""
    if last.get("role") == "user" and text.startswith("<reminder>"):
        return messages[:-1], text
    return messages, ""


def _moved_only(sent: str, received: str, reminder: str) -> bool:
    """Whether ``received`` is ``sent`` with spans removed that the reminder now carries."""
    matcher = difflib.SequenceMatcher(None, sent, received, autojunk=False)
    for op, a0, a1, b0, b1 in matcher.get_opcodes():
        if op == "equal":
            continue
        if received[b0:b1].strip() or not sent[a0:a1].strip() or sent[a0:a1].strip() not in reminder:
            return False
    return True


def assert_same_except_documented_edits(sent: dict[str, Any], received: dict[str, Any]) -> None:
    """Field by field: every field the gateway does not edit is the client's; the edited ones differ
    only as docs/messages.md says (breakpoints, volatile spans moved to the trailing reminder)."""
    sent, received = _without_markers(sent), _without_markers(received)
    messages, reminder = _reminders(received["messages"])
    assert set(received) == set(sent), set(received) ^ set(sent)
    assert received["model"] == CLAUDE  # the configured model's provider id (the same name here, or routed)
    for key in sent:
        if key in ("messages", "system", "model"):
            continue
        assert received[key] == sent[key], key
    assert len(messages) == len(sent["messages"])
    for i, (got, want) in enumerate(zip(messages, sent["messages"], strict=True)):
        assert got == want, f"messages[{i}]"
    system, want_system = received.get("system"), sent.get("system")
    if system != want_system:  # move_volatile: a per-turn span moved into the reminder
        got_text = "".join(b["text"] for b in system) if isinstance(system, list) else str(system)
        want_text = "".join(b["text"] for b in want_system) if isinstance(want_system, list) else str(want_system)
        assert _moved_only(want_text, got_text, reminder), (want_text[:300], got_text[:300])


def _stats(sim: SimHandle) -> dict[str, Any]:
    stats: dict[str, Any] = httpx.get(sim.url + "/sim/stats").json()
    return stats


def test_an_sdk_request_reaches_the_anthropic_upstream_as_sent(gw: GatewayHandle, sim: SimHandle) -> None:
    sim.reset()
    client = anthropic.Anthropic(base_url=gw.url, api_key="sk-client", max_retries=0)
    body = dict(REQUEST)
    known = {k: body.pop(k) for k in ("model", "max_tokens", "messages")}
    raw = client.messages.with_raw_response.create(
        **known, extra_body=body, extra_headers={"anthropic-beta": BETA, "x-session-id": "fidelity"}
    )
    message = raw.parse()
    assert message.id.startswith("msg_") and message.content
    (received,) = sim.received()
    assert_same_except_documented_edits(REQUEST, received)
    headers = _stats(sim)["messages_headers"][-1]
    sent_version = raw.http_response.request.headers["anthropic-version"]  # 2.x sends a newer one than 0.x
    assert headers["anthropic-beta"] == BETA and headers["anthropic-version"] == sent_version
    assert raw.headers["x-ventana-session-id"] == "fidelity"


def test_an_output_format_the_gateway_does_not_know_goes_native_as_sent(gw: GatewayHandle, sim: SimHandle) -> None:
    """``output_config.format`` is translated only where a request crosses to chat (there a shape other
    than ``json_schema`` is a 400); to an Anthropic upstream it is the client's, whatever its shape."""
    sim.reset()
    future = {"effort": "low", "format": {"type": "grammar_from_next_year", "grammar": "root ::= [a-z]+"}}
    body = {**REQUEST, "output_config": future}
    answered = httpx.post(gw.url + "/v1/messages", json=body, headers={"x-api-key": "k"}, timeout=60)
    assert answered.status_code == 200, answered.text
    (received,) = sim.received()
    assert received["output_config"] == future
    assert_same_except_documented_edits(body, received)
    crossing = {"model": "gpt-4o-mini", "max_tokens": 32, "messages": [{"role": "user", "content": "go"}]}
    refused = httpx.post(
        gw.url + "/v1/messages", json={**crossing, "output_config": future}, headers={"x-api-key": "k"}, timeout=60
    )
    assert refused.status_code == 400 and "output_config.format" in refused.json()["error"]["message"]


def test_a_stream_is_relayed_as_the_upstream_wrote_it(gw: GatewayHandle, sim: SimHandle) -> None:
    sim.reset()
    body = {**REQUEST, "stream": True}
    with httpx.stream("POST", gw.url + "/v1/messages", json=body, headers={"x-api-key": "k"}, timeout=60) as response:
        assert response.status_code == 200
        events = response.read()
    assert events.startswith(b"event: message_start") and b"message_stop" in events
    (received,) = sim.received()
    assert_same_except_documented_edits(body, received)
    client = anthropic.Anthropic(base_url=gw.url, api_key="sk-client", max_retries=0)
    with client.messages.stream(model=CLAUDE, max_tokens=64, messages=[{"role": "user", "content": "Read notes"}]) as s:
        final = s.get_final_message()
    assert final.id.startswith("msg_") and final.stop_reason in ("end_turn", "tool_use")


def test_claude_code_sessions_are_named_by_claude_code(gw: GatewayHandle, sim: SimHandle) -> None:
    plain = {"model": CLAUDE, "max_tokens": 16, "messages": [{"role": "user", "content": "same opening words"}]}
    names = []
    for session in ("cc-one", "cc-two"):
        headers = {"x-api-key": "k", "x-claude-code-session-id": session}
        names.append(httpx.post(gw.url + "/v1/messages", json=plain, headers=headers).headers["x-ventana-session-id"])
    from_metadata = httpx.post(gw.url + "/v1/messages", json=REQUEST, headers={"x-api-key": "k"})
    assert names == ["cc-one", "cc-two"]
    assert from_metadata.headers["x-ventana-session-id"] == "5e55-1000-aaaa"


def test_crossing_to_an_openai_model_names_what_cannot_cross(gw: GatewayHandle) -> None:
    body = {**REQUEST, "model": "gpt-4o-mini", "tools": [READ, CRON]}
    refused = httpx.post(gw.url + "/v1/messages", json=body, headers={"x-api-key": "k"})
    assert refused.status_code == 400
    error = refused.json()["error"]
    assert error["type"] == "invalid_request_error" and "messages[2].content[1]" in error["message"]
    crossing = {
        "model": "gpt-4o-mini",
        "max_tokens": 32,
        "messages": [*REQUEST["messages"][:2], {"role": "user", "content": "go"}],
        "thinking": {"type": "adaptive"},
    }
    answered = httpx.post(gw.url + "/v1/messages", json=crossing, headers={"x-api-key": "k"})
    assert answered.status_code == 200, answered.text  # a system-role message crosses as a system message


CLAUDE_BIN = os.environ.get("VENTANA_CLAUDE_BIN") or shutil.which("claude")


@pytest.mark.skipif(CLAUDE_BIN is None, reason="Claude Code is not installed (npm unreachable)")
def test_claude_codes_first_request_reaches_the_anthropic_upstream_as_sent(
    gw: GatewayHandle, sim: SimHandle, tmp_path: Path
) -> None:
    """Claude Code's own first request, captured from it against the simulator, then sent through the gateway."""
    assert CLAUDE_BIN is not None
    sim.reset()
    env = {
        "PATH": os.environ.get("PATH", ""),
        "HOME": str(tmp_path),
        "ANTHROPIC_BASE_URL": sim.url,
        "ANTHROPIC_API_KEY": "sk-capture",
        "ANTHROPIC_MODEL": AGENT,
        "ANTHROPIC_SMALL_FAST_MODEL": AGENT,
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
        "DISABLE_TELEMETRY": "1",
        "DISABLE_AUTOUPDATER": "1",
    }
    subprocess.run([CLAUDE_BIN, "-p", "Say hello"], env=env, capture_output=True, timeout=120, cwd=tmp_path)
    captured = next(b for b in sim.received() if b.get("tools"))
    headers = _stats(sim)["messages_headers"][0]
    sim.reset()
    forwarded = httpx.post(
        gw.url + "/v1/messages", content=orjson.dumps(captured), headers={**headers, "x-api-key": "k"}, timeout=120
    )
    assert forwarded.status_code == 200, forwarded.text[:500]
    (received,) = [b for b in sim.received() if not is_summary_request(b.get("messages") or [])]
    assert_same_except_documented_edits(captured, received)
    assert _stats(sim)["messages_headers"][-1].get("anthropic-beta") == headers.get("anthropic-beta")
