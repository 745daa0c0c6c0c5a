"""Finding: secrets pasted into messages (``sk-...``, ``AKIA...``, ``ghp_...``, JWTs) were stored verbatim.

Well-known secret shapes are now masked by default before anything is written or hashed;
``store.redact_secrets: false`` turns it off. A record without a secret is written as it came.
"""

from __future__ import annotations

import orjson
import pytest

from gateway.config import parse_settings
from gateway.store.record import Counts, RequestRecord
from gateway.store.redact import MASK, Redactor
from gateway.store.sql_recorder import SqlRecorder
from tests.store.records import make_record

SECRETS = [
    "sk-proj-4fJ9aLq2Xw8ZrT6yB1nC3vD5eF7gH9iJ",
    "sk-ant-api03-Zx8Yw7Vu6Ts5Rq4Po3Nm2Lk1Jh0Gf",
    "AKIAIOSFODNN7EXAMPLE",
    "ghp_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8",
    "github_pat_11ABCDEFG0123456789_abcdefghijklmnop",
    "xoxb-1234567890-abcdefghij",
    "AIza" + "SyD-9tSrke72PouQMnMX-a7eZSW0jkFMBWY",
    "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U",
    "-----BEGIN RSA PRIVATE KEY-----\nMIIEpAIBAAKCAQEA\n-----END RSA PRIVATE KEY-----",
    "vk-" + "Q" * 43,
]


def _recorder(**store: object) -> SqlRecorder:
    return SqlRecorder.from_settings(parse_settings({"store": store}))


@pytest.mark.parametrize("secret", SECRETS, ids=lambda s: s[:8])
def test_a_secret_in_a_message_is_masked_by_default(secret: str) -> None:
    record = make_record([{"role": "user", "content": f"here is my key: {secret} thanks"}])
    stored = orjson.dumps(_recorder().redactor.record(record).original).decode()
    assert secret not in stored and MASK in stored and "thanks" in stored


@pytest.mark.parametrize("padding", [0, 6000], ids=["short", "long"])
@pytest.mark.parametrize("secret", SECRETS, ids=lambda s: s[:8])
def test_a_secret_in_the_answer_is_masked_whether_its_text_is_short_or_long(secret: str, padding: int) -> None:
    """The small fields are searched for every literal in one pass up to a length, by one check per
    literal past it: a secret is found either way."""
    record = make_record([{"role": "user", "content": "hi"}]).changed(response_text="x " * padding + f"use {secret} ok")
    masked = _recorder().redactor.record(record).response_text
    assert masked is not None and secret not in masked and MASK in masked and masked.endswith(" ok")


def test_redaction_of_secrets_can_be_turned_off() -> None:
    record = make_record([{"role": "user", "content": f"key {SECRETS[0]}"}])
    assert _recorder(redact_secrets=False).redactor.record(record) is record


def test_a_record_without_secrets_is_written_as_it_came() -> None:
    record = make_record([{"role": "user", "content": "ask the desk-clerk about the risk-free task-list"}])
    assert _recorder().redactor.record(record) is record


def _tool(name: str, description: str) -> dict[str, object]:
    return {"type": "function", "function": {"name": name, "description": description, "parameters": {}}}


def _with_tools(original: list[dict[str, object]], assembled: list[dict[str, object]]) -> RequestRecord:
    messages = [{"role": "user", "content": "list the files"}]
    sent = {"model": "gpt-4o-mini", "messages": messages, "tools": original}
    return make_record(messages, original=sent, assembled={**sent, "tools": assembled})


def test_a_pruned_tool_list_is_looked_at_only_for_its_new_tools(monkeypatch: pytest.MonkeyPatch) -> None:
    """The passes send a new list of the client's own tool objects each turn (pruned, reordered): the
    redactor's verdict on each tool is kept, so only a tool it has not seen is encoded again."""
    tools = [_tool(f"tool_{i}", f"does thing {i}") for i in range(6)]
    redactor = _recorder().redactor
    assert redactor.record(_with_tools(tools, tools[:3])) is not None
    scanned: list[object] = []
    scan = Redactor._scan
    monkeypatch.setattr(Redactor, "_scan", lambda self, value: scanned.append(value) or scan(self, value))
    fresh = _tool("deploy", f"uses {SECRETS[0]}")
    record = _with_tools(tools, [tools[4], tools[1], fresh])  # a new turn's pruning, and one new tool
    masked = redactor.record(record)
    assert not any(value is tool or (isinstance(value, list) and tool in value) for value in scanned for tool in tools)
    assert SECRETS[0] not in orjson.dumps(masked.assembled).decode()
    assert orjson.dumps(masked.original) == orjson.dumps(record.original)


class _CountingMemo:
    """An ObjectMemo stand-in that counts look-ups (the redactor's per-object verdicts)."""

    def __init__(self, memo: object) -> None:
        self.memo = memo
        self.lookups = 0

    def get_or(self, obj: object, compute: object) -> bool:
        self.lookups += 1
        return self.memo.get_or(obj, compute)  # type: ignore[attr-defined, no-any-return]


def test_a_resent_history_is_looked_at_per_chunk_not_per_message() -> None:
    """An agent resends its whole history each turn, journaled before the answer and written after it:
    the verdict on an unchanged run of 32 messages is one look-up, and a new message is still masked."""
    history = [{"role": "user" if i % 2 == 0 else "assistant", "content": f"step {i}"} for i in range(70)]
    redactor = _recorder().redactor
    assert redactor.record(make_record(history)) is not None
    counting = _CountingMemo(redactor._clean)
    redactor._clean = counting  # type: ignore[assignment]
    again = make_record(list(history))  # the next turn: the same message objects in a new list
    assert redactor.record(again) is again
    assert counting.lookups == 0
    turn = [*history, {"role": "user", "content": f"use {SECRETS[2]}"}]
    masked = redactor.record(make_record(turn))
    assert SECRETS[2] not in orjson.dumps(masked.original).decode()
    assert counting.lookups <= 7  # the last chunk's messages (64..70), not all 71


@pytest.mark.parametrize("escaped", [False, True], ids=["plain", "escaped"])
@pytest.mark.parametrize("secret", SECRETS, ids=lambda s: s[:8])
def test_a_secret_in_a_short_body_is_found_in_its_json_bytes_even_spelled_in_escapes(
    secret: str, escaped: bool
) -> None:
    """A short body is searched in the bytes the client sent; an escaped letter (``\\u0073`` for ``s``)
    hides a literal from that search, so such bytes are searched as decoded values."""
    body = {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": f"key {secret} ok"}]}
    raw = orjson.dumps(body)
    if escaped:
        first = secret[0]
        raw = raw.replace(secret.encode(), f"\\u{ord(first):04x}".encode() + secret[1:].encode().replace(b"\n", b"\\n"))
    assert orjson.loads(raw) == body
    record = make_record(body["messages"], original=body, assembled=body, original_json=raw, assembled_json=raw)
    masked = _recorder().redactor.record(record)
    assert masked is not record and secret not in orjson.dumps(masked.original).decode()


def test_a_short_body_without_secrets_is_passed_on_its_json_bytes() -> None:
    body = {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "ask the desk-clerk"}]}
    raw = orjson.dumps(body)
    record = make_record(body["messages"], original=body, assembled=body, original_json=raw, assembled_json=raw)
    assert _recorder().redactor.record(record) is record


def test_the_bodies_looked_at_ahead_are_not_looked_at_again_and_a_secret_found_ahead_is_masked(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``look_ahead`` runs while the provider answers; the journal after the answer uses its verdict."""
    redactor = _recorder().redactor
    looks: list[object] = []
    decide = redactor._bodies_may_hold_secret
    monkeypatch.setattr(redactor, "_bodies_may_hold_secret", lambda sent: looks.append(sent) or decide(sent))
    clean = make_record([{"role": "user", "content": "list the files"}])
    redactor.look_ahead(clean.sent)
    assert redactor.record(clean) is clean and redactor.record(clean) is clean
    secret = make_record([{"role": "user", "content": f"my key {SECRETS[0]} ok"}])
    redactor.look_ahead(secret.sent)
    masked = orjson.dumps(redactor.record(secret).original).decode()
    assert SECRETS[0] not in masked and MASK in masked
    assert looks == [clean.sent, secret.sent]


def test_the_requests_decisions_are_looked_at_once_and_a_secret_in_one_is_masked(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A record is redacted twice (journaled before the answer, written after it): the decisions the request
    carries are part of the verdict made ahead, so only what the answer and the counts added is looked at then.
    A secret a decision quotes is still masked, and so is one in the findings counted after the answer."""
    redactor = _recorder().redactor
    scanned: list[object] = []
    scan = redactor._scan
    monkeypatch.setattr(redactor, "_scan", lambda value: scanned.append(value) or scan(value))
    decision = {"pass": "move_volatile", "action": "moved", "reason": "a per-turn value left the prefix"}
    clean = make_record([{"role": "user", "content": "list the files"}], decisions=(decision,))
    redactor.look_ahead(clean.sent)
    looked_ahead = len(scanned)
    assert redactor.record(clean) is clean and redactor.record(clean) is clean
    assert scanned[:looked_ahead] and not any(b"left the prefix" in orjson.dumps(v) for v in scanned[looked_ahead:])
    quoted = {**decision, "reason": f"the system prompt held {SECRETS[0]} and moved"}
    secret = make_record([{"role": "user", "content": "list the files"}], decisions=(quoted,))
    redactor.look_ahead(secret.sent)
    stored = orjson.dumps(redactor.record(secret).decisions).decode()
    assert SECRETS[0] not in stored and MASK in stored and "and moved" in stored
    plain = make_record([{"role": "user", "content": "hi"}])
    found = RequestRecord(plain.sent, Counts(findings=({"check": "x", "reason": f"saw {SECRETS[0]}"},)), plain.answer)
    redactor.look_ahead(found.sent)
    assert SECRETS[0] not in orjson.dumps(redactor.record(found).decisions).decode()
