"""An agent loop end to end: one task, 150 tool rounds, a 16K window, the openai SDK, no refusals.

The client replays a single-task loop (no user message after the task) round by round
through a real gateway to the provider simulator, which records every body it received.
Before loops had a layout of their own, such a run was refused with 400 once the rounds
filled the window; now every round is answered, every forwarded body fits the window
with each tool call beside its result, and the newest rounds go out as the client sent them.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import openai
import pytest

from gateway.assembly.verify_assembly import tool_pairing_problems
from gateway.tokens import counter_for
from tests.assembly.loop_helpers import agent_loop, loop_round, older_round_as_sent
from tests.procs import SimHandle, run_gateway, run_simulator

WINDOW = 16_000
ROUNDS = 150
KEEP = 4
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "read_file",
            "description": "Read a file of the repository.",
            "parameters": {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]},
        },
    }
]


@pytest.fixture(scope="module")
def loop_sim(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SimHandle]:
    with run_simulator(tmp_path_factory.mktemp("sim-loop")) as handle:
        yield handle


def _config(sim: SimHandle) -> dict[str, Any]:
    model = {"name": "loop-16k", "litellm_model": "openai/gpt-4o-mini", "api_base": sim.base_url}
    return {
        "models": [{**model, "context_window": WINDOW}],
        "policy": {"compaction": {"keep_recent_rounds": KEEP}},
    }


def test_a_150_round_loop_at_16k_is_answered_on_every_round(
    loop_sim: SimHandle, tmp_path_factory: pytest.TempPathFactory
) -> None:
    loop_sim.reset()
    messages: list[dict[str, Any]] = agent_loop(0)
    answered = 0
    with run_gateway(tmp_path_factory.mktemp("gw-loop"), _config(loop_sim)) as gw:
        client = openai.OpenAI(base_url=gw.base_url, api_key="sk-client", max_retries=0)
        for k in range(ROUNDS):
            messages += loop_round(k, words=240)
            got = client.chat.completions.create(
                model="loop-16k", messages=messages, tools=TOOLS, extra_headers={"x-session-id": "loop-150"}
            )
            answered += got.choices[0].message is not None
    assert answered == ROUNDS, "no round refused"
    bodies = loop_sim.received()
    assert len(bodies) == ROUNDS
    counter = counter_for("o200k_base")
    final = agent_loop(ROUNDS, words=240)
    assert counter.messages(final) > 3 * WINDOW, "the loop is far larger than the window"
    for k, body in enumerate(bodies):
        sent = body["messages"]
        assert tool_pairing_problems(sent) == [], f"round {k}"
        assert counter.request(sent, body.get("tools")) <= WINDOW, f"round {k} forwarded over the window"
        assert sent[:2] == final[:2], "system prompt and task untouched"
        newest = agent_loop(k + 1, words=240)[-2 * min(KEEP, k + 1) :]
        assert sent[-len(newest) :] == newest, f"round {k}: the newest rounds are not verbatim"
    last = bodies[-1]["messages"]
    assert any(str(m.get("content")).startswith(("<summary", "[result of ")) for m in last), "it compacted"
    keys = {b.get("prompt_cache_key") for b in bodies[10:]}  # from the first prompt long enough to be cached
    assert len(keys) == 1 and str(next(iter(keys))).startswith("ventana-"), "one cache key for the whole session"


def test_the_clients_own_prompt_cache_key_is_never_replaced(
    loop_sim: SimHandle, tmp_path_factory: pytest.TempPathFactory
) -> None:
    loop_sim.reset()
    with run_gateway(tmp_path_factory.mktemp("gw-key"), _config(loop_sim)) as gw:
        client = openai.OpenAI(base_url=gw.base_url, api_key="sk-client", max_retries=0)
        for key in ("client-chosen", None):
            extra = {"prompt_cache_key": key} if key else {}
            client.chat.completions.create(
                model="loop-16k",
                messages=agent_loop(8, words=240),
                extra_body=extra,
                extra_headers={"x-session-id": "k"},
            )
    mine, ours = loop_sim.received()
    assert mine["prompt_cache_key"] == "client-chosen"
    assert ours["prompt_cache_key"].startswith("ventana-")


def _write_round(k: int) -> list[dict[str, Any]]:
    """A round whose call carries a whole file (the arguments) and whose result is one line."""
    args = json.dumps({"path": f"/repo/src/mod_{k}.py", "content": "def handler(x):\n    return x + 1\n" * 60})
    call = {"id": f"w{k}", "type": "function", "function": {"name": "write_file", "arguments": args}}
    return [
        {"role": "assistant", "content": f"Writing module {k}.", "tool_calls": [call]},
        {"role": "tool", "tool_call_id": f"w{k}", "content": f"wrote /repo/src/mod_{k}.py ({len(args)} bytes)"},
    ]


def test_clear_tool_inputs_stubs_old_arguments_in_what_the_provider_receives(
    loop_sim: SimHandle, tmp_path_factory: pytest.TempPathFactory
) -> None:
    loop_sim.reset()
    config = _config(loop_sim)
    config["policy"]["compaction"] |= {"clear_tool_inputs": True, "strategies": ["clear_tool_results"]}
    messages: list[dict[str, Any]] = agent_loop(0)
    with run_gateway(tmp_path_factory.mktemp("gw-inputs"), config) as gw:
        client = openai.OpenAI(base_url=gw.base_url, api_key="sk-client", max_retries=0)
        for k in range(40):
            messages += _write_round(k)
            client.chat.completions.create(
                model="loop-16k", messages=messages, tools=TOOLS, extra_headers={"x-session-id": "inputs"}
            )
    last = loop_sim.received()[-1]["messages"]
    assert tool_pairing_problems(last) == []
    assert last[-2:] == messages[-2:], "the newest round keeps its arguments"
    # The tail's older rounds may go out with their long arguments stubbed too (condense_tail), the same calls.
    assert all(
        older_round_as_sent(m, w, set()) for m, w in zip(last[-2 * KEEP : -2], messages[-2 * KEEP : -2], strict=True)
    )
    stubbed = [m for m in last[2:-2] if m["role"] == "assistant" and m not in messages]
    assert stubbed, "older calls went out with their arguments cleared"
    for m in stubbed:
        (call,) = m["tool_calls"]
        assert call["function"]["name"] == "write_file" and call["id"].startswith("w")
        assert json.loads(call["function"]["arguments"])["cleared"].startswith('{"path": "/repo/src/mod_')
