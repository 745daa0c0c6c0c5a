"""Forward a Messages body to an upstream that speaks Anthropic's Messages API, as bytes, over one pooled client.

Toward ``anthropic/`` models the gateway sends the client's own Messages body (with the passes'
edits applied in that format, ``formats.messages_apply``), not a chat body through litellm: every
field the gateway does not edit reaches Anthropic as the client sent it, and the client's
``anthropic-version`` and ``anthropic-beta`` headers with it. One ``httpx.AsyncClient``, built at
start-up and closed in the lifespan, carries every such request (litellm is never imported).

The answer comes back as Anthropic wrote it: the JSON bytes, or the SSE byte stream unparsed.
Retries happen only before any byte of the answer was read, on connection failures and the
statuses ``openai_compat.RETRY_STATUSES`` names (plus Anthropic's 529 "overloaded").
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Mapping

import httpx

from gateway.config import ModelConfig, UpstreamConfig
from gateway.errors import UpstreamError, UpstreamTimeout, UpstreamUnavailable
from gateway.upstream.openai_compat import RETRY_STATUSES, error_for_status
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


def _failure(exc: httpx.HTTPError) -> UpstreamError:
    if isinstance(exc, httpx.TimeoutException):
        return UpstreamTimeout(f"upstream timed out: {type(exc).__name__}")
    return UpstreamUnavailable(f"upstream connection failed: {type(exc).__name__}: {exc}")


class MessagesStream:
    """The upstream's SSE bytes as they arrive; ``aclose`` gives the connection back."""

    def __init__(self, response: httpx.Response) -> None:
        self._response = response

    async def chunks(self) -> AsyncIterator[bytes]:
        try:
            async for data in self._response.aiter_raw():
                yield data
        except httpx.HTTPError as exc:
            raise _failure(exc) from exc

    async def aclose(self) -> None:
        await self._response.aclose()


class AnthropicNativeUpstream:
    def __init__(self, config: UpstreamConfig) -> None:
        self._config = config
        self._client: httpx.AsyncClient | None = None

    def _http(self) -> httpx.AsyncClient:
        if self._client is None:  # built on first use: a gateway with no anthropic/ model never opens one
            timeout = httpx.Timeout(self._config.timeout_s, connect=self._config.connect_timeout_s)
            limits = httpx.Limits(max_connections=self._config.max_connections)
            self._client = httpx.AsyncClient(timeout=timeout, limits=limits)
        return self._client

    async def _send(self, model: ModelConfig, raw: bytes, headers: dict[str, str], stream: bool) -> httpx.Response:
        request = self._http().build_request("POST", messages_url(model), content=raw, headers=headers)
        attempt = 0
        while True:
            try:
                response = await self._http().send(request, stream=True)
            except httpx.HTTPError as exc:
                if attempt < self._config.max_retries and not isinstance(exc, httpx.ReadTimeout):
                    attempt += 1
                    await asyncio.sleep(self._config.retry_backoff_s * attempt)
                    continue
                raise _failure(exc) from exc
            if response.status_code < 400:
                if not stream:
                    try:
                        await response.aread()
                    except httpx.HTTPError as exc:
                        raise _failure(exc) from exc
                return response
            content = await response.aread()
            await response.aclose()
            if response.status_code in _RETRY and attempt < self._config.max_retries:
                attempt += 1
                await asyncio.sleep(self._config.retry_backoff_s * attempt)
                continue
            raise error_for_status(response.status_code, response.headers, content, response.reason_phrase)

    async def complete(self, model: ModelConfig, raw: bytes, api_key: str | None, client: Mapping[str, str]) -> bytes:
        """The upstream's Messages JSON for ``raw`` (the body to send, already encoded)."""
        response = await self._send(model, raw, upstream_headers(api_key, client), stream=False)
        return response.content

    async def open_stream(
        self, model: ModelConfig, raw: bytes, api_key: str | None, client: Mapping[str, str]
    ) -> MessagesStream:
        return MessagesStream(await self._send(model, raw, upstream_headers(api_key, client), stream=True))

    async def close(self) -> None:
        if self._client is not None:
            await self._client.aclose()
            self._client = None
