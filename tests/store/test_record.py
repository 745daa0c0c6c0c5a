"""The record is composed of its stages, yet stores, spools and logs the same flat values as before."""

from __future__ import annotations

import orjson
import pytest

from gateway.api.raw_forward import with_params_added
from gateway.store.record import (
    Answer,
    Counts,
    Forwarded,
    Outcome,
    RequestRecord,
    record_dict,
    refusal_record,
    request_record,
)
from gateway.store.spool import record_from_json, record_line, record_to_json
from gateway.upstream.usage import Usage

#: The keys a spooled or logged record carried when RequestRecord repeated its stages' fields.
FLAT_KEYS = [
    "request_id", "session_id", "created_at", "model", "provider", "caller", "original", "assembled",
    "decisions", "stream", "response", "response_text", "finish_reason", "tool_calls", "usage",
    "tokens_original", "tokens_assembled", "overhead_ms", "ttfb_ms", "total_ms", "status", "error",
    "replay_of", "turn", "budget", "predicted_cached_tokens", "prefix_break", "component_tokens", "route",
]  # fmt: skip


def _record() -> RequestRecord:
    body = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
    sent = Forwarded("req-1", "s", 1.5, "m", "openai", "c", body, body, ({"pass": "p"},), turn=3, original_json=b"{}")
    counts = Counts(10, 8, {"total": 8}, ({"pass": "lint_context"},))
    answer = Answer(None, "ok", "stop", None, Usage(prompt_tokens=8, completion_tokens=1))
    return request_record(sent, counts, answer, Outcome(200, None, 0.5, 3.0, 4.0))


def test_the_usage_recorded_adds_what_the_summariser_billed_to_what_the_provider_did() -> None:
    body = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
    answer = Answer(None, "ok", "stop", None, Usage(prompt_tokens=8, completion_tokens=1))
    billed = {"pass": "summarizer", "action": "billed", "detail": {"billed": {"prompt_tokens": 100}}}
    plain = Forwarded("req-1", "s", 1.5, "m", "openai", "c", body, body, ({"pass": "p"},))
    summarised = Forwarded("req-2", "s", 1.5, "m", "openai", "c", body, body, ({"pass": "p"}, billed))
    outcome = Outcome(200, None, 0.5, 3.0, 4.0)
    assert request_record(plain, Counts(), answer, outcome).answer is answer  # nothing billed besides: as answered
    record = request_record(summarised, Counts(), answer, outcome)
    assert (record.usage.prompt_tokens, record.usage.completion_tokens, record.response_text) == (108, 1, "ok")
    assert answer.usage.prompt_tokens == 8


def test_spool_and_log_lines_keep_the_flat_keys_and_order() -> None:
    data = record_dict(_record())
    assert list(data) == FLAT_KEYS
    assert data["decisions"] == [{"pass": "p"}, {"pass": "lint_context"}]  # the findings after the passes'
    assert data["usage"]["prompt_tokens"] == 8


def test_a_spooled_record_reads_back_with_the_same_values() -> None:
    record = _record()
    back = record_from_json(record_to_json(record))
    assert record_dict(back) == record_dict(record)
    assert back.original_json is None  # transient bytes are never spooled


def test_values_read_under_their_column_names_from_their_stage() -> None:
    record = _record()
    assert (record.request_id, record.tokens_assembled, record.finish_reason) == ("req-1", 8, "stop")
    assert record.status == 200
    assert record.turn == record.sent.turn and record.ttfb_ms == record.outcome.ttfb_ms


def test_changed_replaces_by_column_name_and_decisions_whole() -> None:
    record = _record()
    changed = record.changed(created_at=9.0, error="x", decisions=[{"pass": "only"}])
    assert (changed.created_at, changed.error, changed.decisions) == (9.0, "x", [{"pass": "only"}])
    assert (record.created_at, record.error) == (1.5, None)  # frozen: the original is untouched
    with pytest.raises(TypeError, match="no stored value 'colour'"):
        record.changed(colour="red")


def test_a_refusal_carries_no_body() -> None:
    refused = refusal_record("r", caller="c", route="messages", status=401, reason="no key", created_at=2.0)
    assert (refused.original, refused.status, refused.error, refused.route) == ({}, 401, "no key", "messages")


def test_a_body_forwarded_with_parameters_appended_is_written_once_and_reads_back_whole() -> None:
    """The journal line of a request whose passes only added a parameter (``prompt_cache_key``) holds the
    client's body once and the added keys, not the body twice; read back, ``assembled`` is what was sent."""
    messages = [{"role": "user", "content": f"step {i}: " + "output line\n" * 40} for i in range(30)]
    body = {"model": "m", "messages": messages, "tools": [], "max_tokens": 32}
    raw = orjson.dumps(body) + b"\n"
    sent_bytes = with_params_added(raw, {"prompt_cache_key": "s-1a2b", "stream_options": {"include_usage": True}})
    assert sent_bytes is not None
    assembled = orjson.loads(sent_bytes)
    sent = Forwarded(
        "req-2", "s", 1.5, "m", "openai", "c", body, assembled, (), original_json=raw, assembled_json=sent_bytes
    )
    record = request_record(sent, Counts(), Answer(), Outcome(200, None, 0.5, 3.0, 4.0))
    line = record_line(record)
    assert line.count(b"step 29") == 1 and len(line) < len(raw) + 1000
    back = record_from_json(line)
    assert back.original == body and back.assembled == assembled
    assert list(back.assembled) == list(assembled)  # the keys in the order they were sent


def test_a_changed_body_is_written_as_it_was_forwarded() -> None:
    body = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "temperature": 0.2}
    for assembled in ({**body, "temperature": 0.5}, {"model": "m", "messages": body["messages"]}):
        raw, sent_bytes = orjson.dumps(body), orjson.dumps(assembled)
        sent = Forwarded(
            "req-3", "s", 1.5, "m", "openai", "c", body, assembled, (), original_json=raw, assembled_json=sent_bytes
        )
        back = record_from_json(
            record_line(request_record(sent, Counts(), Answer(), Outcome(200, None, 0.5, 3.0, 4.0)))
        )
        assert back.original == body and back.assembled == assembled
