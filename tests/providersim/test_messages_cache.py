"""The simulator's Messages route caches by Anthropic's content blocks, not by messages."""

from __future__ import annotations

from typing import Any

from gateway.formats.anthropic_messages import chat_body
from gateway.providersim.cache_models import AnthropicCacheModel
from gateway.providersim.messages import content_blocks
from gateway.tokens import counter_for

COUNTER = counter_for("o200k_base")
MARK = {"cache_control": {"type": "ephemeral"}}
SYSTEM = "You are a careful agent. " * 300  # ~1,500 tokens: past the 1,024-token minimum


def _turns(results_per_turn: int, rounds: int) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = [{"role": "user", "content": "start"}]
    for r in range(rounds):
        calls = [
            {"type": "tool_use", "id": f"t{r}_{k}", "name": "read", "input": {"k": k}} for k in range(results_per_turn)
        ]
        results = [{"type": "tool_result", "tool_use_id": c["id"], "content": f"result {r} {c['id']}"} for c in calls]
        messages += [{"role": "assistant", "content": calls}, {"role": "user", "content": results}]
    return messages


def _request(messages: list[dict[str, Any]]) -> dict[str, Any]:
    """The last block carries the breakpoint, as Ventana and Claude Code place it."""
    last = messages[-1]
    content = last["content"] if isinstance(last["content"], list) else [{"type": "text", "text": last["content"]}]
    marked = {**last, "content": [*content[:-1], {**content[-1], **MARK}]}
    return {"model": "claude-sonnet-4-5", "max_tokens": 5, "system": SYSTEM, "messages": [*messages[:-1], marked]}


def _read_after(previous: list[dict[str, Any]], current: list[dict[str, Any]]) -> int:
    cache = AnthropicCacheModel()
    for messages in (previous, current):
        request = _request(messages)
        result = cache.account(content_blocks(COUNTER, request, chat_body(request, "anthropic")))
    return result.read


def test_the_last_breakpoint_is_read_within_twenty_blocks() -> None:
    assert _read_after(_turns(5, 3), _turns(5, 4)) > 1024


def test_a_turn_of_more_than_twenty_blocks_puts_the_last_breakpoint_out_of_reach() -> None:
    """24 tool_use and 24 tool_result blocks are 48 blocks: messages would be 2, well within 20."""
    assert _read_after(_turns(24, 3), _turns(24, 4)) == 0


def test_blocks_are_content_blocks_and_breakpoints_follow_cache_control() -> None:
    request = _request(_turns(3, 1))
    prompt = content_blocks(COUNTER, request, chat_body(request, "anthropic"))
    assert len(prompt.blocks) == 1 + 1 + 3 + 3 + 1  # system, "start", 3 calls, 3 results, reply priming
    assert prompt.breakpoints == (len(prompt.blocks) - 2,)
