"""Relaying an OpenAI-compatible stream: SSE lines end at LF only, whatever the text contains."""

from __future__ import annotations

import openai
import pytest

from tests.procs import GatewayHandle


@pytest.mark.parametrize("separator", ["\x85", "\u2028", "\u2029", "\x0b", "\x0c", "\x1c"])
def test_unicode_line_separators_survive_the_stream(passthrough_gateway: GatewayHandle, separator: str) -> None:
    client = openai.OpenAI(base_url=passthrough_gateway.base_url, api_key="sk-sse", max_retries=0)
    messages = [{"role": "user", "content": f"before{separator}after"}]
    plain = client.chat.completions.create(model="gpt-4o-mini", messages=messages).choices[0].message.content
    chunks = list(client.chat.completions.create(model="gpt-4o-mini", messages=messages, stream=True))
    streamed = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert separator in streamed
    assert streamed == plain
