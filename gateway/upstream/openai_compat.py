"""Forward a body to an upstream that already speaks the OpenAI API, over one pooled client.

litellm's ``acompletion`` costs milliseconds per call and a client per request costs
far more; an OpenAI-compatible provider gets the assembled body as JSON over a single
``httpx.AsyncClient`` shared by every request.

Retries happen only where they are safe: before any byte of the answer was read, on
connection failures and on the statuses in ``RETRY_STATUSES``.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import httpx
import orjson

from gateway.config import ModelConfig, UpstreamConfig
from gateway.errors import (
    UpstreamError,
    UpstreamRateLimited,
    UpstreamRejected,
    UpstreamTimeout,
    UpstreamUnavailable,
)

RETRY_STATUSES = frozenset({500, 502, 503, 504})
MAX_RETRY_AFTER_S = 2.0
DEFAULT_API_BASE = "https://api.openai.com/v1"


def _provider_message(response: httpx.Response) -> str:
    try:
        data = orjson.loads(response.content)
        message = data.get("error", {}).get("message") if isinstance(data, dict) else None
    except (orjson.JSONDecodeError, AttributeError):
        message = None
    return message or response.text[:500] or response.reason_phrase


def error_for_status(response: httpx.Response) -> UpstreamError:
    """Map a provider's error status to the error the client sees, keeping retry-after."""
    status = response.status_code
    message = f"upstream returned {status}: {_provider_message(response)}"
    if status == 429:
        retry_after = response.headers.get("retry-after")
        headers = {"retry-after": retry_after} if retry_after else {}
        return UpstreamRateLimited(message, headers=headers)
    if status in (408, 504):
        return UpstreamTimeout(message)
    if 400 <= status < 500:
        return UpstreamRejected(message, status_code=status)
    return UpstreamUnavailable(message)


def error_for_exception(exc: httpx.HTTPError) -> UpstreamError:
    if isinstance(exc, httpx.TimeoutException):
        return UpstreamTimeout(f"upstream timed out: {type(exc).__name__}")
    return UpstreamUnavailable(f"upstream connection failed: {type(exc).__name__}: {exc}")


class _SSEStream:
    def __init__(self, response: httpx.Response) -> None:
        self._response = response

    async def chunks(self) -> AsyncIterator[bytes]:
        try:
            async for line in self._lines():
                if not line.startswith(b"data:"):
                    continue
                payload = line[5:].strip()
                if payload == b"[DONE]":
                    return
                if payload:
                    yield payload
        except httpx.TimeoutException as exc:
            raise error_for_exception(exc) from exc
        except httpx.HTTPError as exc:
            raise UpstreamUnavailable(f"upstream dropped the stream before it ended: {type(exc).__name__}") from exc
        raise UpstreamUnavailable("upstream closed the stream before [DONE]")

    async def _lines(self) -> AsyncIterator[bytes]:
        """Split the body on LF (CRLF) only, as SSE does.

        Not ``aiter_lines``: it splits like ``str.splitlines``, also on U+0085, U+2028 and
        U+2029, which JSON encoders leave raw inside strings, so a chunk carrying one of them
        was cut in two and failed to parse (found by fuzzing).
        """
        buffer = bytearray()
        async for data in self._response.aiter_bytes():
            buffer += data
            while (end := buffer.find(b"\n")) >= 0:
                yield bytes(buffer[:end]).rstrip(b"\r")
                del buffer[: end + 1]
        if buffer:
            yield bytes(buffer).rstrip(b"\r")

    async def aclose(self) -> None:
        await self._response.aclose()


class OpenAICompatUpstream:
    def __init__(self, config: UpstreamConfig) -> None:
        self._config = config
        self._client = httpx.AsyncClient(
            timeout=httpx.Timeout(config.timeout_s, connect=config.connect_timeout_s),
            limits=httpx.Limits(
                max_connections=config.max_connections, max_keepalive_connections=config.max_connections
            ),
        )

    def _request(self, model: ModelConfig, body: dict[str, Any], api_key: str | None) -> httpx.Request:
        base = (model.api_base or DEFAULT_API_BASE).rstrip("/")
        headers = {"content-type": "application/json"}
        if api_key:
            headers["authorization"] = f"Bearer {api_key}"
        payload = {**body, "model": model.upstream_model}
        return self._client.build_request(
            "POST", f"{base}/chat/completions", content=orjson.dumps(payload), headers=headers
        )

    async def _send(self, request: httpx.Request, *, stream: bool) -> httpx.Response:
        attempt = 0
        while True:
            try:
                response = await self._client.send(request, stream=stream)
            except httpx.HTTPError as exc:
                if attempt < self._config.max_retries and not isinstance(exc, httpx.ReadTimeout):
                    attempt += 1
                    await asyncio.sleep(self._config.retry_backoff_s * attempt)
                    continue
                raise error_for_exception(exc) from exc
            if response.status_code < 400:
                return response
            if stream:
                await response.aread()
                await response.aclose()
            if attempt < self._config.max_retries and self._retryable(response):
                attempt += 1
                await asyncio.sleep(self._delay(response, attempt))
                continue
            raise error_for_status(response)

    def _retryable(self, response: httpx.Response) -> bool:
        if response.status_code in RETRY_STATUSES:
            return True
        if response.status_code == 429:
            retry_after = _seconds(response.headers.get("retry-after"))
            return retry_after is not None and retry_after <= MAX_RETRY_AFTER_S
        return False

    def _delay(self, response: httpx.Response, attempt: int) -> float:
        retry_after = _seconds(response.headers.get("retry-after"))
        if retry_after is not None:
            return min(retry_after, MAX_RETRY_AFTER_S)
        return self._config.retry_backoff_s * attempt

    async def complete(self, model: ModelConfig, body: dict[str, Any], api_key: str | None) -> dict[str, Any]:
        response = await self._send(self._request(model, body, api_key), stream=False)
        try:
            data = orjson.loads(response.content)
        except orjson.JSONDecodeError as exc:
            raise UpstreamUnavailable("upstream returned malformed JSON") from exc
        if not isinstance(data, dict) or not isinstance(data.get("choices"), list):
            raise UpstreamUnavailable("upstream returned a body that is not a chat completion")
        return data

    async def open_stream(self, model: ModelConfig, body: dict[str, Any], api_key: str | None) -> _SSEStream:
        response = await self._send(self._request(model, body, api_key), stream=True)
        return _SSEStream(response)

    async def close(self) -> None:
        await self._client.aclose()


def _seconds(value: str | None) -> float | None:
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        return None
