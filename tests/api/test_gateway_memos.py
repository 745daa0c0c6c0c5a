"""Each gateway owns its caches: two built in one process never share one, and shutdown frees them.

Two apps from ``create_app`` with different tokenizers serve the same agent conversation
through the OpenAI SDK. Each one's ``Memos`` (``gateway.memos``) fills with its own
encoding's entries only, the other's stays as it was, and leaving the lifespan empties them.
"""

from __future__ import annotations

import time
from typing import Any

import openai

from gateway.api.app import create_app
from gateway.config import parse_settings
from gateway.memos import BytesMemo, Memos
from tests.inproc import serve_in_thread
from tests.procs import SimHandle, sim_models

MODEL = "small-window"  # 8K tokens: the conversation below is over the compaction threshold


def _agent_conversation() -> list[dict[str, Any]]:
    """A task and six tool rounds with long results: over 55 % of 8K, so results are priced for clearing."""
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "You are a build agent. Never push to main."},
        {"role": "user", "content": "Find why the nightly build fails and fix it."},
    ]
    for n in range(6):
        read = {"name": "read_log", "arguments": f'{{"part": {n}}}'}
        call = {"id": f"call_{n}", "type": "function", "function": read}
        messages.append({"role": "assistant", "content": None, "tool_calls": [call]})
        log = " ".join(f"step{n}-{i} compiled module_{i} ok" for i in range(160))
        messages.append({"role": "tool", "tool_call_id": f"call_{n}", "content": log})
    messages.append({"role": "user", "content": "Go on."})
    return messages


def _send(url: str, messages: list[dict[str, Any]]) -> None:
    client = openai.OpenAI(base_url=url + "/v1", api_key="sk-test", max_retries=0)
    answer = client.chat.completions.create(model=MODEL, messages=messages)  # type: ignore[arg-type]
    assert answer.choices[0].message is not None


def _counted(memos: Memos, encoding: str) -> int:
    """The prefix's blocks in ``encoding`` once the request's bookkeeping after the answer has counted them."""
    for _ in range(100):
        found = len(memos.prefix_by_bytes.for_encoding(encoding))
        if found:
            return found
        time.sleep(0.05)
    return 0


def test_two_gateways_in_one_process_keep_their_own_memos(sim: SimHandle) -> None:
    app_a = create_app(parse_settings({"models": sim_models(sim.base_url)}))  # o200k_base, from the model name
    app_b = create_app(parse_settings({"models": sim_models(sim.base_url, tokenizer="cl100k_base")}))
    memos_a: Memos = app_a.state.gateway.memos
    memos_b: Memos = app_b.state.gateway.memos
    messages = _agent_conversation()
    with serve_in_thread(app_a) as url_a, serve_in_thread(app_b) as url_b:
        _send(url_a, messages)
        assert _counted(memos_a, "o200k_base") > 0
        assert len(memos_a.prefix_by_object) > 0, "the assembled request's blocks"
        assert len(memos_a.stubs) > 0, "tool results were priced for clearing"
        assert len(memos_b.prefix_by_object) == len(memos_b.stubs) == len(memos_b.prefix_by_bytes) == 0

        filled_a = len(memos_a.prefix_by_object)
        _send(url_b, messages)
        assert _counted(memos_b, "cl100k_base") > 0
        assert len(memos_b.prefix_by_bytes.for_encoding("o200k_base")) == 0, "B counts in its own encoding"
        assert len(memos_a.prefix_by_bytes.for_encoding("cl100k_base")) == 0, "and none of it lands in A"
        assert len(memos_b.stubs) > 0
        assert len(memos_a.prefix_by_object) == filled_a, "B's request left A's memos as they were"
    # Each lifespan's shutdown freed its gateway's memos.
    assert len(memos_a.prefix_by_object) == len(memos_a.stubs) == len(memos_a.prefix_by_bytes) == 0
    assert len(memos_b.prefix_by_object) == len(memos_b.stubs) == len(memos_b.prefix_by_bytes) == 0


def test_bytes_memo_is_bounded_by_the_bytes_it_keeps_across_encodings() -> None:
    memo: BytesMemo[int] = BytesMemo(limit=10)
    memo.put("o200k_base", b"12345", 1)
    memo.put("cl100k_base", b"1234", 2)
    assert memo.for_encoding("o200k_base") == {b"12345": 1} and memo.for_encoding("cl100k_base") == {b"1234": 2}
    memo.put("o200k_base", b"abc", 3)  # 12 bytes would pass the limit: everything goes first
    assert memo.for_encoding("o200k_base") == {b"abc": 3} and memo.for_encoding("cl100k_base") == {}
    assert len(memo) == 1
