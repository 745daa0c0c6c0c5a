"""The fuzz campaign, extended (issue 25): nesting depth, NUL and lone surrogates, bodies over the
limit, slow and abandoned bodies. Every request gets a success or a named 4xx, never a 5xx or a
hang, and every success is recorded in the store.
"""

from __future__ import annotations

import json
import socket
import sqlite3
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.api.fuzz_checks import check_answer
from tests.procs import GatewayHandle, SimHandle, run_gateway, sim_models

FUZZ = settings(deadline=None, database=None, suppress_health_check=list(HealthCheck))
LIMIT = 64 * 1024
USER = {"role": "user", "content": "hi"}


@pytest.fixture(scope="module")
def gw(sim: SimHandle, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[GatewayHandle, Path]]:
    tmp = tmp_path_factory.mktemp("gw-fuzz-hostile")
    config = {"models": sim_models(sim.base_url), "limits": {"max_body_bytes": LIMIT}}
    with run_gateway(tmp, config) as handle:
        yield handle, tmp / "ventana.db"


def _post(url: str, raw: bytes) -> tuple[int, bytes, str | None]:
    headers = {"content-type": "application/json", "authorization": "Bearer sk-fuzz"}
    r = httpx.post(url + "/v1/chat/completions", content=raw, headers=headers, timeout=30)
    return r.status_code, r.content, r.headers.get("x-ventana-request-id")


def _recorded(db: Path, request_ids: set[str]) -> set[str]:
    deadline = time.monotonic() + 30
    while True:
        with sqlite3.connect(db) as conn:
            found = {r[0] for r in conn.execute("SELECT request_id FROM requests")} & request_ids
        if found == request_ids or time.monotonic() > deadline:
            return found
        time.sleep(0.2)


def _check_all(gw: tuple[GatewayHandle, Path], bodies: list[bytes], what: str) -> None:
    handle, db = gw
    answered = set()
    for raw in bodies:
        status, payload, request_id = _post(handle.url, raw)
        check_answer(status, payload, what=f"{what}: {raw[:300]!r}")
        if status == 200 and request_id:
            answered.add(request_id)
    assert _recorded(db, answered) == answered, "an answered request was not recorded"
    assert handle.proc.poll() is None


def _nested(depth: int, kind: str) -> str:
    return ("[" * depth + "1" + "]" * depth) if kind == "array" else ('{"a":' * depth + "1" + "}" * depth)


def test_any_nesting_depth_anywhere_is_answered_or_refused(gw: tuple[GatewayHandle, Path]) -> None:
    fields = ["metadata", "response_format", "tool_parameters", "content_part", "logit_bias"]
    bodies: list[bytes] = []

    @settings(FUZZ, max_examples=40)
    @given(depth=st.integers(1, 1100), kind=st.sampled_from(["array", "object"]), field=st.sampled_from(fields))
    def run(depth: int, kind: str, field: str) -> None:
        deep = _nested(depth, kind)
        head = '{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}]'
        if field == "tool_parameters":
            tool = f'{{"type":"function","function":{{"name":"f","parameters":{{"type":"object","x":{deep}}}}}}}'
            raw = f'{head},"tools":[{tool}]}}'
        elif field == "content_part":
            part = f'{{"type":"text","text":"hi","extra":{deep}}}'
            raw = f'{{"model":"gpt-4o-mini","messages":[{{"role":"user","content":[{part}]}}]}}'
        else:
            raw = f'{head},"{field}":{{"k":{deep}}}}}'
        bodies.append(raw.encode())

    run()
    _check_all(gw, bodies, "nesting")


HOSTILE_TEXT = st.lists(
    st.sampled_from(["\x00", "\ud800", "\udfff", "\ud83d", "a", "é", "\u2028", "\x1b", "</SUMMARY>"]),
    min_size=1,
    max_size=12,
).map("".join)


def test_nul_and_lone_surrogates_in_any_field_are_answered_and_recorded(gw: tuple[GatewayHandle, Path]) -> None:
    bodies: list[bytes] = []

    @settings(FUZZ, max_examples=40)
    @given(text=HOSTILE_TEXT, field=st.sampled_from(["user", "stop", "metadata", "content", "name", "system"]))
    def run(text: str, field: str) -> None:
        body: dict[str, Any] = {"model": "gpt-4o-mini", "messages": [dict(USER)]}
        if field == "content":
            body["messages"][0]["content"] = text
        elif field == "name":
            body["messages"][0]["name"] = text
        elif field == "system":
            body["messages"].insert(0, {"role": "system", "content": text})
        elif field == "metadata":
            body["metadata"] = {"k": text}
        elif field == "stop":
            body["stop"] = [text]
        else:
            body["user"] = text
        bodies.append(json.dumps(body).encode())  # stdlib json writes lone surrogates as \\udXXX escapes

    run()
    _check_all(gw, bodies, "NUL/surrogates")


@pytest.mark.parametrize("size", [LIMIT - 200, LIMIT + 1, 4 * LIMIT])
@pytest.mark.parametrize("chunked", [False, True])
def test_bodies_around_the_limit_get_an_answer_or_a_413(
    gw: tuple[GatewayHandle, Path], size: int, chunked: bool
) -> None:
    handle, _ = gw
    filler = "x" * max(0, size - 80)
    raw = json.dumps({"model": "gpt-4o-mini", "messages": [{"role": "user", "content": filler}]}).encode()
    content: Any = iter([raw[i : i + 8192] for i in range(0, len(raw), 8192)]) if chunked else raw
    r = httpx.post(handle.url + "/v1/chat/completions", content=content, headers={"content-type": "application/json"})
    check_answer(r.status_code, r.content, what=f"{size} bytes, chunked={chunked}")
    assert r.status_code == (200 if len(raw) <= LIMIT else 413)


def test_a_slow_body_is_answered_and_an_abandoned_one_harms_nothing(gw: tuple[GatewayHandle, Path]) -> None:
    handle, _ = gw
    raw = json.dumps({"model": "gpt-4o-mini", "messages": [USER]}).encode()

    def trickle() -> Iterator[bytes]:
        for i in range(0, len(raw), 8):
            time.sleep(0.05)
            yield raw[i : i + 8]

    r = httpx.post(handle.url + "/v1/chat/completions", content=trickle(), headers={"content-type": "application/json"})
    assert r.status_code == 200
    host, port = handle.url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=5) as s:  # half a body, then gone
        head = f"POST /v1/chat/completions HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\n"
        s.sendall((head + f"Content-Length: {len(raw)}\r\n\r\n").encode() + raw[: len(raw) // 2])
    ok = httpx.post(handle.url + "/v1/chat/completions", json={"model": "gpt-4o-mini", "messages": [USER]})
    assert ok.status_code == 200 and handle.proc.poll() is None


JSON_LEAF = st.none() | st.booleans() | st.integers(-(2**70), 2**70) | st.floats(allow_nan=False) | HOSTILE_TEXT
JSON_VALUE = st.recursive(
    JSON_LEAF,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(HOSTILE_TEXT, inner, max_size=4),
    max_leaves=12,
)
METADATA = st.one_of(
    JSON_VALUE,  # any type: a string, a list, a number, an object of anything
    st.dictionaries(st.text(max_size=80), st.text(max_size=600), max_size=20),  # around the API's bounds
    st.integers(1, 600).map(lambda depth: {"k": json.loads(_nested(depth, "object"))}),
)


def test_responses_metadata_of_any_shape_is_answered_or_refused_before_forwarding(
    gw: tuple[GatewayHandle, Path], sim: SimHandle
) -> None:
    """Responses echoes and stores ``metadata`` after the provider answered: a wrong type or a deep
    nesting was a 500 for a paid answer (issue 35). Now it is a 400 naming it, before forwarding."""
    handle, _ = gw
    bodies: list[tuple[bytes, bool]] = []

    @settings(FUZZ, max_examples=60)
    @given(metadata=METADATA, stream=st.booleans())
    def run(metadata: Any, stream: bool) -> None:
        bodies.append(
            (
                json.dumps({"model": "gpt-4o-mini", "input": "hi", "metadata": metadata, "stream": stream}).encode(),
                stream,
            )
        )

    run()
    deep = '{"model":"gpt-4o-mini","input":"hi","metadata":{"k":' + _nested(600, "object") + "}}"
    bodies += [(deep.encode(), False), (b'{"model":"gpt-4o-mini","input":"hi","metadata":"x"}', False)]
    statuses = []
    for raw, stream in bodies:
        sim.reset()
        r = httpx.post(
            handle.url + "/v1/responses", content=raw, headers={"content-type": "application/json"}, timeout=30
        )
        statuses.append(r.status_code)
        assert r.status_code < 500, f"{raw[:300]!r}: {r.status_code} {r.content[:300]!r}"
        if r.status_code == 400:
            error = r.json()["error"]
            assert error["param"] == "metadata" or error["code"] == "invalid_json", error  # a lone surrogate
            assert len(error["message"]) > 10, error
            assert sim.received() == [], "refused, so never forwarded"
        elif stream:
            assert b"response.completed" in r.content, r.content[-300:]
        else:
            assert r.status_code == 200 and r.json()["object"] == "response"
    assert 200 in statuses and 400 in statuses
