"""Forward through litellm for providers that do not speak the OpenAI API (Anthropic, Gemini, ...).

litellm takes seconds to import, so it is imported on first use, never at start-up.
Its exceptions are mapped here, most specific first, into the gateway's own.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from typing import Any

import orjson

from gateway.config import ModelConfig, UpstreamConfig
from gateway.errors import (
    UpstreamError,
    UpstreamRateLimited,
    UpstreamRejected,
    UpstreamTimeout,
    UpstreamUnavailable,
)


def _map_litellm_error(exc: Exception) -> UpstreamError:
    from litellm import exceptions as litellm

    message = f"upstream error: {type(exc).__name__}: {exc}"
    if isinstance(exc, litellm.RateLimitError):
        return UpstreamRateLimited(message)
    if isinstance(exc, litellm.Timeout):
        return UpstreamTimeout(message)
    if isinstance(exc, litellm.BadRequestError | litellm.NotFoundError | litellm.AuthenticationError):
        return UpstreamRejected(message, status_code=int(getattr(exc, "status_code", 400) or 400))
    return UpstreamUnavailable(message)


class _LiteLLMStream:
    def __init__(self, response: Any) -> None:
        self._response = response

    async def chunks(self) -> AsyncIterator[bytes]:
        try:
            async for chunk in self._response:
                yield orjson.dumps(chunk.model_dump(exclude_none=False))
        except UpstreamError:
            raise
        except Exception as exc:  # litellm raises its own hierarchy and provider SDK errors
            raise _map_litellm_error(exc) from exc

    async def aclose(self) -> None:
        close = getattr(self._response, "aclose", None)
        if close is not None:
            await close()


class LiteLLMUpstream:
    def __init__(self, config: UpstreamConfig) -> None:
        self._config = config

    def _kwargs(self, model: ModelConfig, body: dict[str, Any], api_key: str | None) -> dict[str, Any]:
        kwargs = {**body, "model": model.litellm_model, "timeout": self._config.timeout_s}
        kwargs["num_retries"] = self._config.max_retries
        if model.api_base:
            kwargs["api_base"] = model.api_base
        key = api_key or (os.environ.get(model.api_key_env) if model.api_key_env else None)
        if key:
            kwargs["api_key"] = key
        return kwargs

    async def complete(
        self, model: ModelConfig, body: dict[str, Any], api_key: str | None, *, raw: bytes | None = None
    ) -> dict[str, Any]:
        import litellm

        try:
            response = await litellm.acompletion(**self._kwargs(model, body, api_key))
        except Exception as exc:
            raise _map_litellm_error(exc) from exc
        data: dict[str, Any] = response.model_dump()
        return data

    async def open_stream(
        self, model: ModelConfig, body: dict[str, Any], api_key: str | None, *, raw: bytes | None = None
    ) -> _LiteLLMStream:
        import litellm

        try:
            response = await litellm.acompletion(**self._kwargs(model, body, api_key))
        except Exception as exc:
            raise _map_litellm_error(exc) from exc
        return _LiteLLMStream(response)

    async def close(self) -> None:
        return None
