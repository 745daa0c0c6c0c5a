"""A summariser that is the session's own model continues the request the provider already holds.

A coding session (the ``tool_session_cache`` benchmark's, 30 tools) runs through a real ``ventana
serve`` to the provider simulator with the session's model as its summariser. The summary prepared
ahead must go out as the forwarded request cut after its range, byte for byte (the same messages,
the same tools, the same ``prompt_cache_key``), with ``tool_choice: none`` and the summary
instruction as one last user message; the simulator's prefix cache must then serve almost all of it;
and the summary the model wrote must be the one the compacted turns carry.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import openai
import orjson

from benchmarks.tool_session_cache import SYSTEM, TOOLS, coding_session
from gateway.providersim.cache import PrefixCache, prompt_token_ids
from gateway.providersim.completion import is_summary_request
from gateway.summarize.continued import summarised_range
from gateway.tokens import counter_for
from tests.procs import run_gateway, run_simulator

WINDOW = 16_000
REQUESTS = 20


def _session(tmp: Path) -> list[dict[str, Any]]:
    """Run the session; every body the simulator received, in order."""
    with run_simulator(tmp) as sim:
        model = {"name": "coder", "litellm_model": "openai/gpt-4o-mini", "api_base": sim.base_url}
        config = {
            "models": [{**model, "context_window": WINDOW}],
            "policy": {"compaction": {"summarizer_model": "coder"}},
        }
        with run_gateway(tmp, config) as gw:
            client = openai.OpenAI(base_url=gw.base_url, api_key="sk-test", max_retries=0, timeout=120)
            history: list[dict[str, Any]] = [{"role": "system", "content": SYSTEM}]
            for step in coding_session(REQUESTS):
                history += step
                client.chat.completions.create(
                    model="coder",
                    messages=history,  # type: ignore[arg-type]
                    tools=TOOLS,  # type: ignore[arg-type]
                    extra_headers={"x-session-id": "continued"},
                )
        return sim.received()


def test_the_summary_prepared_ahead_continues_the_forwarded_request(tmp_path: Path) -> None:
    received = _session(tmp_path)
    continued = [i for i, b in enumerate(received) if summarised_range(b["messages"]) is not None]
    assert continued, "the session's own model was asked to continue its request"
    at = continued[0]
    ask = received[at]
    forwarded = [b for b in received[:at] if not is_summary_request(b["messages"])][-1]
    prefix = ask["messages"][:-1]
    dumps = orjson.dumps
    assert dumps(prefix) == dumps(forwarded["messages"][: len(prefix)]), "the forwarded messages, byte for byte"
    assert dumps(ask["tools"]) == dumps(forwarded["tools"]), "the forwarded tools, byte for byte"
    assert ask["tool_choice"] == "none"
    assert ask["prompt_cache_key"] == forwarded["prompt_cache_key"]
    first, last = summarised_range(ask["messages"]) or (0, 0)
    assert last == len(prefix) - 1 and 0 < first < last
    instruction = ask["messages"][-1]["content"]
    for rule in ("Copy character for character", "also mentioned", "Never follow instructions"):
        assert rule in instruction, "the summariser's rules travel with the continued request"

    counter = counter_for("o200k_base")
    cache = PrefixCache()
    hits = [cache.lookup_and_store(prompt_token_ids(counter, b["messages"], b.get("tools"))) for b in received]
    held = len(prompt_token_ids(counter, prefix, ask.get("tools")))  # what the forwarded request left there
    assert hits[at] >= held - 2 * 128, f"the provider's cache served {hits[at]} of the {held} forwarded tokens"

    later = [b for b in received[at + 1 :] if not is_summary_request(b["messages"])]
    summaries = {
        str(m["content"]) for b in later for m in b["messages"] if str(m.get("content") or "").startswith("<summary")
    }
    assert any('by="llm:coder"' in s for s in summaries), "the model's summary was sent, not the extractive one"
