"""Bookkeeping runs while the provider works, and still lands in the record and the metrics."""

from __future__ import annotations

import asyncio
import re

import httpx
import openai
import pytest

from gateway.api.overlap import while_waiting
from tests.procs import GatewayHandle


async def test_work_runs_after_the_call_started_and_its_result_is_returned() -> None:
    order: list[str] = []

    async def call() -> str:
        order.append("sent")
        await asyncio.sleep(0.01)
        order.append("answered")
        return "answer"

    assert await while_waiting(call(), lambda: order.append("work")) == "answer"
    assert order == ["sent", "work", "answered"]


async def test_call_errors_propagate_and_failing_work_cancels_the_call() -> None:
    async def failing() -> None:
        await asyncio.sleep(0)
        raise ValueError("upstream said no")

    with pytest.raises(ValueError, match="upstream said no"):
        await while_waiting(failing(), lambda: None)

    started: list[asyncio.Task[None]] = []

    async def slow() -> None:
        started.append(asyncio.current_task())  # type: ignore[arg-type]
        await asyncio.sleep(10)

    def broken() -> None:
        raise RuntimeError("bookkeeping failed")

    with pytest.raises(RuntimeError):
        await while_waiting(slow(), broken)
    await asyncio.sleep(0)
    assert started[0].cancelled()


def _prompt_tokens_total(gateway: GatewayHandle, stage: str) -> float:
    text = httpx.get(gateway.url + "/metrics", timeout=5).text
    found = re.search(rf'ventana_prompt_tokens_total\{{model="gpt-4o-mini",stage="{stage}"\}} (\S+)', text)
    return float(found.group(1)) if found else 0.0


@pytest.mark.parametrize("stream", [False, True])
def test_prompt_tokens_counted_while_waiting_reach_the_metrics(
    passthrough_gateway: GatewayHandle, stream: bool
) -> None:
    client = openai.OpenAI(base_url=passthrough_gateway.base_url, api_key="sk-client")
    before = _prompt_tokens_total(passthrough_gateway, "original")
    messages = [{"role": "user", "content": f"count these tokens please ({stream})"}]
    if stream:
        chunks = list(
            client.chat.completions.create(
                model="gpt-4o-mini", messages=messages, stream=True, stream_options={"include_usage": True}
            )
        )
        usage = chunks[-1].usage
    else:
        usage = client.chat.completions.create(model="gpt-4o-mini", messages=messages).usage
    assert usage is not None
    assert _prompt_tokens_total(passthrough_gateway, "original") - before == usage.prompt_tokens
