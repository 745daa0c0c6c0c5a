"""Choose, per configured model, the upstream that forwards it and the key it is sent with."""

from __future__ import annotations

import os
from typing import Any

from gateway.config import ModelConfig, UpstreamConfig
from gateway.upstream.litellm_upstream import LiteLLMUpstream
from gateway.upstream.openai_compat import OpenAICompatUpstream
from gateway.upstream.types import UpstreamStream


class UpstreamRouter:
    def __init__(self, config: UpstreamConfig) -> None:
        self._openai = OpenAICompatUpstream(config)
        self._litellm = LiteLLMUpstream(config)

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
        return await self._pick(model).complete(model, body, api_key, raw=raw)

    async def open_stream(
        self, model: ModelConfig, body: dict[str, Any], api_key: str | None, *, raw: bytes | None = None
    ) -> UpstreamStream:
        return await self._pick(model).open_stream(model, body, api_key, raw=raw)

    async def close(self) -> None:
        await self._openai.close()
        await self._litellm.close()
