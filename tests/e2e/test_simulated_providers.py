"""``ventana serve`` with no keys answers models of any provider prefix through the simulator.

A config naming an ``anthropic/`` and a ``gemini/`` model, with neither key set, must answer
both through all three front doors (chat, Responses, Messages) with the official SDKs: the
banner promises it. Before the fix, the Anthropic model was announced as simulated and every
request then failed with litellm's 401 "Missing Anthropic API Key"; the Gemini one was sent
in Gemini's wire format to a simulator that does not speak it.
"""

from __future__ import annotations

from collections.abc import Iterator

import anthropic
import pytest
from openai import OpenAI

from tests.procs import GatewayHandle, run_gateway

MODELS = [
    {"name": "claude-sonnet-4-5", "litellm_model": "anthropic/claude-sonnet-4-5", "api_key_env": "ANTHROPIC_API_KEY"},
    {"name": "gemini-2.5-flash", "litellm_model": "gemini/gemini-2.5-flash", "api_key_env": "GEMINI_API_KEY"},
]
NAMES = [m["name"] for m in MODELS]


@pytest.fixture(scope="module")
def gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[GatewayHandle]:
    config = {"database_url": "sqlite:///ventana.db", "models": MODELS}
    with run_gateway(tmp_path_factory.mktemp("simulated-providers"), config) as gw:
        yield gw


def test_banner_says_which_models_the_simulator_answers(gateway: GatewayHandle) -> None:
    log = gateway.log()
    assert "LOCAL PROVIDER SIMULATOR" in log
    for line in ("claude-sonnet-4-5 (anthropic)", "gemini-2.5-flash (gemini)"):
        assert line in log, log
    assert f"{gateway.url}/ui" in log and f"{gateway.url}/metrics" in log, log


@pytest.mark.parametrize("model", NAMES)
@pytest.mark.parametrize("stream", [False, True])
def test_chat_completions_door(gateway: GatewayHandle, model: str, stream: bool) -> None:
    client = OpenAI(base_url=gateway.base_url, api_key="anything", max_retries=0)
    messages = [{"role": "user", "content": "Say hello"}]
    if stream:
        chunks = client.chat.completions.create(model=model, messages=messages, stream=True)  # type: ignore[arg-type]
        text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    else:
        reply = client.chat.completions.create(model=model, messages=messages)  # type: ignore[arg-type]
        text = reply.choices[0].message.content or ""
        if model.startswith("claude"):  # an Anthropic Messages answer, translated to chat by litellm
            assert reply.usage is not None and "cache_creation_input_tokens" in reply.usage.model_dump()
        else:  # the simulator's own chat answer, relayed as it came
            assert reply.system_fingerprint == "fp_ventana_sim"
    assert text.startswith("Simulated answer"), text


@pytest.mark.parametrize("model", NAMES)
def test_responses_door(gateway: GatewayHandle, model: str) -> None:
    client = OpenAI(base_url=gateway.base_url, api_key="anything", max_retries=0)
    reply = client.responses.create(model=model, input="Say hello")
    assert reply.status == "completed"
    assert reply.output_text.startswith("Simulated answer"), reply.output_text


@pytest.mark.parametrize("model", NAMES)
@pytest.mark.parametrize("stream", [False, True])
def test_messages_door(gateway: GatewayHandle, model: str, stream: bool) -> None:
    client = anthropic.Anthropic(base_url=gateway.url, api_key="anything", max_retries=0)
    messages: list[anthropic.types.MessageParam] = [{"role": "user", "content": "Say hello"}]
    if stream:
        with client.messages.stream(model=model, max_tokens=200, messages=messages) as events:
            message = events.get_final_message()
    else:
        message = client.messages.create(model=model, max_tokens=200, messages=messages)
    text = "".join(b.text for b in message.content if b.type == "text")
    assert text.startswith("Simulated answer"), text
    assert message.usage.input_tokens > 0


def test_with_one_key_set_the_banner_says_which_model_is_real(tmp_path_factory: pytest.TempPathFactory) -> None:
    """A key for some providers and not others: the banner names each model's destination.

    ``simulated: true`` sends a model to the simulator even with its key set (the key here is
    fake: an answer proves the request never left the machine)."""
    forced = {"name": "gpt-4o-mini", "litellm_model": "openai/gpt-4o-mini", "api_key_env": "OPENAI_API_KEY"}
    config = {"database_url": "sqlite:///ventana.db", "models": [*MODELS, {**forced, "simulated": True}]}
    env = {"ANTHROPIC_API_KEY": "sk-ant-not-a-real-key", "OPENAI_API_KEY": "sk-not-a-real-key"}
    with run_gateway(tmp_path_factory.mktemp("one-key"), config, env=env) as gw:
        client = OpenAI(base_url=gw.base_url, api_key="anything", max_retries=0)
        reply = client.chat.completions.create(model="gpt-4o-mini", messages=[{"role": "user", "content": "Hi"}])
        lines = gw.log().splitlines()
    assert (reply.choices[0].message.content or "").startswith("Simulated answer")
    claude = next(line for line in lines if "claude-sonnet-4-5 (anthropic)" in line)
    gemini = next(line for line in lines if "gemini-2.5-flash (gemini)" in line)
    gpt = next(line for line in lines if "gpt-4o-mini (openai)" in line)
    assert "real: anthropic's API, key from ANTHROPIC_API_KEY" in claude and "SIMULATED" not in claude
    assert "SIMULATED (GEMINI_API_KEY not set)" in gemini
    assert "SIMULATED (simulated: true)" in gpt
    assert "not-a-real-key" not in "\n".join(lines)
