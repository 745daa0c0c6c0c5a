"""The client's bytes go to the provider when nothing changed them, and only then."""

from __future__ import annotations

import httpx
import orjson
import pytest

from gateway.api.raw_forward import untouched_bytes, with_params_added, with_usage_requested
from tests.procs import GatewayHandle, SimHandle

BODIES = [
    b'{"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "hi"}], "stream": true}',
    b'{"model":"gpt-4o-mini","messages":[{"role":"user","content":"}"}],"stream":true}\n  ',
    b'{"model":"m","messages":[],"stream_options":{"include_usage":true}}',
]


@pytest.mark.parametrize("raw", BODIES)
def test_usage_request_equals_the_re_encoded_body(raw: bytes) -> None:
    body = orjson.loads(raw)
    expected = {**body, "stream_options": {**(body.get("stream_options") or {}), "include_usage": True}}
    spliced = with_usage_requested(raw, body)
    assert spliced is not None
    assert orjson.loads(spliced) == expected


def test_stream_options_without_usage_needs_a_re_encode() -> None:
    raw = b'{"model":"m","messages":[],"stream_options":{"include_usage":false}}'
    assert with_usage_requested(raw, orjson.loads(raw)) is None


def test_bytes_are_forwarded_only_for_the_clients_own_body_and_model() -> None:
    raw = b'{"model":"gpt-4o-mini","messages":[]}'
    body = orjson.loads(raw)
    assert untouched_bytes(raw, body, body, "gpt-4o-mini") is raw
    assert untouched_bytes(raw, body, dict(body), "gpt-4o-mini") is None
    assert untouched_bytes(raw, body, body, "gpt-4o") is None


def test_passthrough_gateway_forwards_the_clients_exact_bytes(
    passthrough_gateway: GatewayHandle, sim: SimHandle
) -> None:
    raw = b'{ "messages" : [{"role":"user","content":"keep   my spacing"}],  "model":"gpt-4o-mini", "x_extra": 1 }'
    sim.reset()
    response = httpx.post(
        passthrough_gateway.base_url + "/chat/completions",
        content=raw,
        headers={"content-type": "application/json"},
        timeout=10,
    )
    assert response.status_code == 200
    assert sim.record_path.read_bytes().rstrip(b"\n") == raw


def test_null_usage_is_cut_from_relayed_chunks_without_changing_them() -> None:
    from gateway.api.stream_relay import StreamRelay

    chunk = {"id": "c", "choices": [{"index": 0, "delta": {"content": "hé"}, "finish_reason": None}], "usage": None}
    relay = StreamRelay(model_name="m", forward_usage=False)
    out = relay.feed(orjson.dumps(chunk))
    assert out is not None and out.startswith(b"data: ") and out.endswith(b"\n\n")
    assert orjson.loads(out[6:-2]) == {k: v for k, v in chunk.items() if k != "usage"}
    assert relay.answer().response_text == "hé"


def test_added_params_are_appended_to_the_clients_bytes() -> None:
    raw = b'{ "model":"m", "messages": [ {"role":"user","content":"hi"} ] }\n'
    spliced = with_params_added(raw, {"prompt_cache_key": "k-1", "prompt_cache_retention": "24h"})
    assert spliced is not None and spliced.startswith(raw.rstrip()[:-1])
    assert orjson.loads(spliced) == {**orjson.loads(raw), "prompt_cache_key": "k-1", "prompt_cache_retention": "24h"}
    assert with_params_added(b"[1]", {"a": 1}) is None and with_params_added(raw, {}) is None


def test_a_prompt_cache_key_goes_out_with_the_clients_own_message_bytes(
    default_gateway: GatewayHandle, sim: SimHandle
) -> None:
    """The default policy names the session's cache (hint_cache); the messages are not encoded again."""
    long = "Please review this paragraph about the quarterly plan carefully.  " * 150  # over 1,024 tokens
    raw = orjson.dumps({"messages": [{"role": "user", "content": long}], "model": "gpt-4o-mini"}).replace(
        b'"messages":', b'"messages" :  '
    )
    sim.reset()
    response = httpx.post(
        default_gateway.base_url + "/chat/completions",
        content=raw,
        headers={"content-type": "application/json", "x-session-id": "raw-cache-key"},
        timeout=10,
    )
    assert response.status_code == 200
    sent = sim.record_path.read_bytes().rstrip(b"\n")
    assert sent.startswith(raw[:-1]), "the client's bytes, spacing included, then the added key"
    assert orjson.loads(sent)["prompt_cache_key"]


def test_a_batch_is_relayed_before_its_choices_are_read_and_read_before_the_next() -> None:
    """The record's text, tool calls and finish reason come from the chunks after each batch is out: the first
    byte never waits for them, the answer still has all of them, and one batch of choices is held at most."""
    from gateway.api.answer import _fed
    from gateway.api.stream_relay import StreamRelay

    def chunk(delta: dict[str, object], finish: str | None = None) -> bytes:
        return orjson.dumps({"id": "c", "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})

    call = {"index": 0, "id": "call_1", "function": {"name": "ls", "arguments": '{"p":'}}
    first = [chunk({"role": "assistant", "content": ""}), chunk({"content": "Hello"}), chunk({"content": " there"})]
    second = [chunk({"tool_calls": [call]}), chunk({"tool_calls": [{"index": 0, "function": {"arguments": '"."}'}}]})]
    relay = StreamRelay(model_name="m", forward_usage=False)
    read: list[object] = []
    absorb = relay._absorb
    relay._absorb = lambda choice: (read.append(choice), absorb(choice))[1]  # type: ignore[method-assign]
    outs, failure = _fed(relay, first)
    assert failure is None and len(outs) == 3 and read == []  # relayed, nothing read yet
    outs, failure = _fed(relay, [*second, chunk({}, "tool_calls")])
    assert failure is None and len(outs) == 3 and len(read) == 3  # the first batch, read before the second
    answer = relay.answer()
    assert answer.response_text == "Hello there" and answer.finish_reason == "tool_calls"
    expected = {"id": "call_1", "type": "function", "function": {"name": "ls", "arguments": '{"p":"."}'}}
    assert answer.tool_calls == [expected]
