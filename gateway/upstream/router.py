"""Choose, per configured model, the upstream that forwards it and the key it is sent with."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any

from gateway.config import ModelConfig, UpstreamConfig
from gateway.errors import UpstreamError
from gateway.upstream.litellm_upstream import LiteLLMUpstream
from gateway.upstream.openai_compat import OpenAICompatUpstream
from gateway.upstream.types import UpstreamStream

if TYPE_CHECKING:  # imported on first use: httpx costs ~0.15 s of start-up a gateway without Claude models never needs
    from gateway.upstream.anthropic_native import AnthropicNativeUpstream

#: The key a simulated model is sent with when none is set: the simulator checks none, but litellm
#: refuses to call an Anthropic-format upstream without one ("Missing Anthropic API Key").
SIMULATOR_KEY = "ventana-simulator"


def _key(model: ModelConfig, api_key: str | None) -> str | None:
    return api_key or (SIMULATOR_KEY if model.simulated and not model.speaks_openai else None)


class UpstreamRouter:
    def __init__(self, config: UpstreamConfig) -> None:
        self._openai = OpenAICompatUpstream(config)
        self._litellm = LiteLLMUpstream(config)
        self._config = config
        self._messages: AnthropicNativeUpstream | None = None

    @property
    def messages(self) -> AnthropicNativeUpstream:
        """Messages bodies to ``anthropic/`` models, forwarded in their own format (``api/messages_native.py``)."""
        if self._messages is None:
            from gateway.upstream.anthropic_native import AnthropicNativeUpstream

            self._messages = AnthropicNativeUpstream(self._config)
        return self._messages

    def _pick(self, model: ModelConfig) -> OpenAICompatUpstream | LiteLLMUpstream:
        return self._openai if model.speaks_openai else self._litellm

    @staticmethod
    def provider_key(model: ModelConfig, client_key: str | None = None) -> str | None:
        """The key sent upstream: the client's in pass-through mode, else the gateway's env var."""
        if client_key:
            return client_key
        return os.environ.get(model.api_key_env) if model.api_key_env else None

    async def complete(
        self, model: ModelConfig, body: dict[str, Any], api_key: str | None, *, raw: bytes | None = None
    ) -> dict[str, Any]:
        try:
            return await self._pick(model).complete(model, body, _key(model, api_key), raw=raw)
        except UpstreamError as exc:
            raise scrub_key(exc, api_key) from exc.__cause__

    async def open_stream(
        self, model: ModelConfig, body: dict[str, Any], api_key: str | None, *, raw: bytes | None = None
    ) -> UpstreamStream:
        try:
            stream = await self._pick(model).open_stream(model, body, _key(model, api_key), raw=raw)
        except UpstreamError as exc:
            raise scrub_key(exc, api_key) from exc.__cause__
        return _ScrubbedStream(stream, api_key) if api_key else stream

    async def responses_complete(self, model: ModelConfig, raw: bytes, api_key: str | None) -> dict[str, Any]:
        """The upstream's own ``POST /responses`` (a model that ``speaks_responses``), body as given."""
        try:
            return await self._openai.responses_complete(model, raw, api_key)
        except UpstreamError as exc:
            raise scrub_key(exc, api_key) from exc.__cause__

    async def responses_stream(self, model: ModelConfig, raw: bytes, api_key: str | None) -> UpstreamStream:
        try:
            stream = await self._openai.responses_stream(model, raw, api_key)
        except UpstreamError as exc:
            raise scrub_key(exc, api_key) from exc.__cause__
        return _ScrubbedStream(stream, api_key) if api_key else stream

    async def close(self) -> None:
        await self._openai.close()
        await self._litellm.close()
        if self._messages is not None:
            await self._messages.close()


REDACTED = "[redacted key]"


def scrub_key(exc: UpstreamError, api_key: str | None) -> UpstreamError:
    """Remove the provider key from an upstream error's message, in place.

    Providers quote the key they rejected ("Incorrect API key provided: sk-..."); the
    message goes to the client, the log and the store, none of which may hold a key.
    """
    if api_key and api_key in exc.message:
        exc.message = exc.message.replace(api_key, REDACTED)
        exc.args = (exc.message,)
    if api_key and any(api_key in a for a in exc.attempts):  # each attempt's body is recorded too
        exc.attempts = tuple(a.replace(api_key, REDACTED) for a in exc.attempts)
    return exc


class _ScrubbedStream:
    """An UpstreamStream whose mid-stream errors never carry the provider key."""

    def __init__(self, inner: UpstreamStream, api_key: str) -> None:
        self._inner = inner
        self._api_key = api_key

    async def chunks(self) -> AsyncIterator[bytes]:
        try:
            async for payload in self._inner.chunks():
                yield payload
        except UpstreamError as exc:
            raise scrub_key(exc, self._api_key) from exc.__cause__

    async def aclose(self) -> None:
        await self._inner.aclose()
