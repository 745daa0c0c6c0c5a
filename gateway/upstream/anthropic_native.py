"""Forward a Messages body to an upstream that speaks Anthropic's Messages API, as bytes, over one pooled client.

Toward ``anthropic/`` models the gateway sends the client's own Messages body (with the passes'
edits applied in that format, ``formats.messages_apply``), not a chat body through litellm: every
field the gateway does not edit reaches Anthropic as the client sent it, and the client's
``anthropic-version`` and ``anthropic-beta`` headers with it. One pool of keep-alive connections
(``http1.Pool``, as for OpenAI-compatible upstreams; httpx cost several times its CPU a request),
closed in the lifespan, carries every such request (litellm is never imported); ``upstream.max_connections``
bounds each upstream's connections, ``upstream.pool_timeout_s`` the wait for one (``slots.Slots``).

The answer comes back as Anthropic wrote it: the JSON bytes, or the SSE byte stream unparsed.
Retries happen only before any byte of the answer was read, on connection failures and the
statuses ``openai_compat.RETRY_STATUSES`` names (plus Anthropic's 529 "overloaded").
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Mapping

from gateway.config import ModelConfig, UpstreamConfig
from gateway.upstream.http1 import Pool, Response
from gateway.upstream.openai_compat import (
    RETRY_STATUSES,
    HeldStream,
    error_for_exception,
    error_for_status,
    read_all,
    retryable_exception,
)
from gateway.upstream.slots import Slots
from gateway.upstream.types import PASSED_HEADERS

DEFAULT_API_BASE = "https://api.anthropic.com"
DEFAULT_VERSION = "2023-06-01"
_RETRY = RETRY_STATUSES | {529}


def messages_url(model: ModelConfig) -> str:
    """``api_base`` as litellm reads it for ``anthropic/`` models: the path ``/v1/messages`` is added."""
    base = (model.api_base or DEFAULT_API_BASE).rstrip("/")
    if base.endswith("/v1/messages"):
        return base
    return base + ("/messages" if base.endswith("/v1") else "/v1/messages")


def upstream_headers(api_key: str | None, client: Mapping[str, str]) -> dict[str, str]:
    headers = {"content-type": "application/json", "anthropic-version": DEFAULT_VERSION}
    headers.update({k: client[k] for k in PASSED_HEADERS if client.get(k)})
    if api_key:
        headers["x-api-key"] = api_key
    return headers


class MessagesStream(HeldStream):
    """The upstream's SSE bytes as they arrive; ``aclose`` gives the connection back."""

    async def chunks(self) -> AsyncIterator[bytes]:
        try:
            async for data in self._response.iter_any():
                yield data
        except (TimeoutError, OSError) as exc:
            raise error_for_exception(exc) from exc


class AnthropicNativeUpstream:
    def __init__(self, config: UpstreamConfig) -> None:
        self._config = config
        self._pool = Pool(connect_timeout=config.connect_timeout_s, read_timeout=config.timeout_s)
        self._slots = Slots(config.max_connections, config.pool_timeout_s)

    async def _send(self, model: ModelConfig, raw: bytes, headers: dict[str, str]) -> Response:
        url = messages_url(model)
        attempt = 0
        while True:
            try:
                response = await self._pool.post(url, raw, headers)
            except (TimeoutError, OSError) as exc:
                if attempt < self._config.max_retries and retryable_exception(exc):
                    attempt += 1
                    await asyncio.sleep(self._config.retry_backoff_s * attempt)
                    continue
                raise error_for_exception(exc) from exc
            if response.status < 400:
                return response
            content = await read_all(response)
            if response.status in _RETRY and attempt < self._config.max_retries:
                attempt += 1
                await asyncio.sleep(self._config.retry_backoff_s * attempt)
                continue
            raise error_for_status(response.status, response.headers, content, response.reason)

    async def complete(self, model: ModelConfig, raw: bytes, api_key: str | None, client: Mapping[str, str]) -> bytes:
        """The upstream's Messages JSON for ``raw`` (the body to send, already encoded)."""
        release = await self._slots.take(messages_url(model))
        try:
            return await read_all(await self._send(model, raw, upstream_headers(api_key, client)))
        finally:
            release()

    async def open_stream(
        self, model: ModelConfig, raw: bytes, api_key: str | None, client: Mapping[str, str]
    ) -> MessagesStream:
        release = await self._slots.take(messages_url(model))
        try:
            return MessagesStream(await self._send(model, raw, upstream_headers(api_key, client)), release)
        except BaseException:
            release()
            raise

    async def close(self) -> None:
        await self._pool.close()
