"""Each provider cache model follows its provider's published rules."""

from __future__ import annotations

from gateway.providersim.cache_models import (
    AnthropicCacheModel,
    OpenAICacheModel,
    PromptBlocks,
    VLLMCacheModel,
    prompt_blocks,
)
from gateway.tokens import counter_for


def _blocks(*sizes: int, start: int = 0, marks: tuple[int, ...] = ()) -> PromptBlocks:
    out, n = [], start
    for size in sizes:
        out.append(tuple(range(n, n + size)))
        n += size
    return PromptBlocks(tuple(out), marks)


def test_openai_needs_1024_tokens_and_counts_128_token_steps() -> None:
    cache = OpenAICacheModel()
    short = _blocks(1000)
    assert cache.account(short).read == 0
    assert cache.account(short).read == 0, "a prompt under 1024 tokens is never cached"
    long = _blocks(2000)
    assert cache.account(long).read == 0
    assert cache.account(long).read == 1920  # 15 full 128-token blocks
    extended = _blocks(2000, 700)
    assert cache.account(extended).read == 1920


def test_openai_change_at_the_front_invalidates_everything() -> None:
    cache = OpenAICacheModel()
    cache.account(_blocks(3000))
    assert cache.account(_blocks(3000, start=1)).read == 0


def test_vllm_caches_16_token_blocks_without_minimum() -> None:
    cache = VLLMCacheModel()
    cache.account(_blocks(100))
    assert cache.account(_blocks(100)).read == 96


def test_anthropic_caches_only_at_breakpoints_and_reports_writes() -> None:
    cache = AnthropicCacheModel(minimum=1024)
    unmarked = _blocks(1500, 500)
    assert cache.account(unmarked).read == 0 and cache.account(unmarked).write == 0
    marked = _blocks(1500, 500, marks=(0,))
    first = cache.account(marked)
    assert (first.read, first.write) == (0, 1500)
    second = cache.account(marked)
    assert (second.read, second.write) == (1500, 0)


def test_anthropic_lookback_finds_an_earlier_breakpoint_within_20_blocks() -> None:
    cache = AnthropicCacheModel(minimum=1024)
    cache.account(_blocks(1200, *([10] * 5), marks=(0,)))
    grown = _blocks(1200, *([10] * 5), marks=(5,))
    result = cache.account(grown)
    assert result.read == 1200
    assert result.write == 50
    far = AnthropicCacheModel(minimum=1024)
    far.account(_blocks(1200, *([10] * 25), marks=(0,)))
    assert far.account(_blocks(1200, *([10] * 25), marks=(25,))).read == 0, "beyond the 20-block lookback"


def test_anthropic_prefix_below_minimum_is_not_written() -> None:
    cache = AnthropicCacheModel(minimum=2048)
    marked = _blocks(1500, marks=(0,))
    assert cache.account(marked).write == 0
    assert cache.account(marked).read == 0


def test_prompt_blocks_mark_cache_control_and_sum_to_the_request_count() -> None:
    counter = counter_for("o200k_base")
    tools = [{"type": "function", "function": {"name": "f", "description": "d"}, "cache_control": {"type": "x"}}]
    messages = [
        {"role": "system", "content": [{"type": "text", "text": "rules", "cache_control": {"type": "ephemeral"}}]},
        {"role": "user", "content": "hello"},
    ]
    prompt = prompt_blocks(counter, messages, tools)
    assert prompt.breakpoints == (1, 2)
    assert sum(len(b) for b in prompt.blocks) == counter.request(messages, tools)
