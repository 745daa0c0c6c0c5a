"""Hypothesis-generated conversations against a running gateway: an answer or a 4xx that names the problem."""

from __future__ import annotations

from typing import Any

import httpx
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.api.conversations import MODEL, hostile_body, odd_text, unknown_fields, valid_conversation
from tests.api.fuzz_checks import check_answer, post_chat
from tests.procs import GatewayHandle, SimHandle

FUZZ = settings(deadline=None, database=None, suppress_health_check=list(HealthCheck))


def test_hostile_bodies_never_get_a_5xx(passthrough_gateway: GatewayHandle) -> None:
    @settings(FUZZ, max_examples=100)
    @given(body=hostile_body())
    def run(body: Any) -> None:
        check_answer(*post_chat(passthrough_gateway.base_url, body), what=repr(body)[:800])

    run()
    assert passthrough_gateway.proc.poll() is None


def test_valid_conversations_with_unknown_fields_are_answered(passthrough_gateway: GatewayHandle) -> None:
    @settings(FUZZ, max_examples=40)
    @given(messages=valid_conversation(), extra=unknown_fields, stream=st.booleans())
    def run(messages: list[dict[str, Any]], extra: dict[str, Any], stream: bool) -> None:
        body = {"model": MODEL, "messages": messages, "stream": stream, **extra}
        status, payload = post_chat(passthrough_gateway.base_url, body)
        assert status == 200, payload[:500]
        check_answer(status, payload, what=repr(body)[:800])

    run()


def test_odd_unicode_reaches_the_provider_byte_for_byte(passthrough_gateway: GatewayHandle, sim: SimHandle) -> None:
    @settings(FUZZ, max_examples=25)
    @given(text=odd_text)
    def run(text: str) -> None:
        messages = [{"role": "system", "content": text}, {"role": "user", "content": text + "?"}]
        status, payload = post_chat(passthrough_gateway.base_url, {"model": MODEL, "messages": messages})
        assert status == 200, payload[:300]
        assert sim.received()[-1]["messages"] == messages

    run()


@given(
    messages=valid_conversation(max_turns=2),
    where=st.integers(min_value=0),
    call_id=st.text("abcdef0123456789", min_size=4, max_size=12),
)
@settings(FUZZ, max_examples=30)
def test_a_tool_result_without_its_call_is_named(
    passthrough_gateway: GatewayHandle, messages: list[dict[str, Any]], where: int, call_id: str
) -> None:
    plain = [m for m in messages if m["role"] != "tool" and not m.get("tool_calls")]
    i = where % (len(plain) + 1)
    orphan = {"role": "tool", "tool_call_id": "orphan_" + call_id, "content": "result"}
    body = {"model": MODEL, "messages": [*plain[:i], orphan, *plain[i:]]}
    status, payload = post_chat(passthrough_gateway.base_url, body)
    error = check_answer(status, payload, what=repr(body)[:500])
    assert status == 400 and error is not None
    assert error["param"] == f"messages[{i}].tool_call_id"
    assert "orphan_" + call_id in error["message"]


def test_deeply_nested_json_is_a_400_not_a_crash(passthrough_gateway: GatewayHandle) -> None:
    for depth in (1_000, 100_000):
        raw = b'{"model": "gpt-4o-mini", "messages": ' + b"[" * depth + b"]" * depth + b"}"
        error = check_answer(*post_chat(passthrough_gateway.base_url, None, raw=raw), what=f"depth {depth}")
        assert error is not None
    assert httpx.get(passthrough_gateway.url + "/healthz").status_code == 200
