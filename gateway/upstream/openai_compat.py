"""Forward a body to an upstream that already speaks the OpenAI API, over one pooled client.

litellm's ``acompletion`` costs milliseconds per call and a client per request costs
far more; an OpenAI-compatible provider gets the assembled body as JSON over one pool of
keep-alive connections shared by every request (``http1.Pool``). It is the hot path: on this
2-core machine a pooled httpx client sustained ~550 requests/s at one client against a
no-latency upstream, aiohttp ~1,900, and aiohttp still cost ~125 us of CPU a request where
the pool costs ~35 (``benchmarks/RESULTS.md``, "Performance").

Retries happen only where they are safe: before any byte of the answer was read, on
connection failures and on the statuses in ``RETRY_STATUSES``.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Mapping
from contextlib import aclosing
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
from gateway.upstream.http1 import ConnectTimeout, Pool, Response
from gateway.upstream.slots import Slots

RETRY_STATUSES = frozenset({500, 502, 503, 504})
MAX_RETRY_AFTER_S = 2.0
DEFAULT_API_BASE = "https://api.openai.com/v1"


def _provider_message(content: bytes, reason: str) -> str:
    try:
        data = orjson.loads(content)
        message = data.get("error", {}).get("message") if isinstance(data, dict) else None
    except (orjson.JSONDecodeError, AttributeError):
        message = None
    return message or content[:500].decode("utf-8", "replace") or reason


#: How much of a failed attempt's body the record keeps.
ATTEMPT_CHARS = 500


def error_for_status(status: int, headers: Mapping[str, str], content: bytes, reason: str = "") -> UpstreamError:
    """Map a provider's error status to the error the client sees, keeping retry-after."""
    message = f"upstream returned {status}: {_provider_message(content, reason)}"
    if status == 429:
        retry_after = headers.get("retry-after")
        extra = {"retry-after": retry_after} if retry_after else {}
        return UpstreamRateLimited(message, headers=extra)
    if status in (408, 504):
        return UpstreamTimeout(message)
    if 400 <= status < 500:
        return UpstreamRejected(message, status_code=status)
    return UpstreamUnavailable(message)


def error_for_exception(exc: BaseException) -> UpstreamError:
    """Map a connection failure (or a timeout) to the gateway's upstream errors."""
    if isinstance(exc, TimeoutError):
        return UpstreamTimeout(f"upstream timed out: {type(exc).__name__}")
    return UpstreamUnavailable(f"upstream connection failed: {type(exc).__name__}: {exc}")


def retryable_exception(exc: BaseException) -> bool:
    """Connection failures are retried; a read timeout is not (the provider may still be working)."""
    if isinstance(exc, ConnectTimeout):
        return True
    return not isinstance(exc, TimeoutError)


def _split_events(buffer: bytes) -> tuple[list[bytes], bytes, bool]:
    """The ``data:`` payloads of the complete lines in ``buffer``, the incomplete rest, and
    whether ``[DONE]`` was reached (payloads after it are dropped)."""
    *lines, rest = buffer.split(b"\n")
    payloads: list[bytes] = []
    for raw in lines:
        line = raw.strip()
        if not line.startswith(b"data:"):
            continue
        payload = line[5:].strip()
        if payload == b"[DONE]":
            return payloads, rest, True
        if payload:
            payloads.append(payload)
    return payloads, rest, False


async def read_all(response: Response) -> bytes:
    """The whole body, then the connection back to the pool; a failure mid-read is an upstream error."""
    try:
        return await response.read()
    except (TimeoutError, OSError) as exc:
        raise error_for_exception(exc) from exc
    finally:
        response.release()


def _nothing() -> None:
    return None


_NOTHING: Callable[[], None] = _nothing


class HeldStream:
    """An upstream's streamed answer and the connection slot it holds (``slots.Slots``), given back once,
    however the stream ends: closed, or dropped unread (the client left first)."""

    def __init__(self, response: Response, release: Callable[[], None] = _NOTHING) -> None:
        self._response = response
        self._release = release

    async def aclose(self) -> None:
        self._response.release()
        self._give_back()

    def _give_back(self) -> None:
        release, self._release = self._release, _NOTHING
        release()

    def __del__(self) -> None:
        self._give_back()


class _SSEStream(HeldStream):
    async def chunks(self) -> AsyncGenerator[bytes, None]:
        async with aclosing(self._reads()) as batches:  # closed with this one, when a reader stops early
            async for batch in batches:
                for payload in batch:
                    yield payload

    def batches(self) -> AsyncIterator[list[bytes]]:
        """The stream's ``data:`` payloads, those that arrived in one read together: a relay writes them to
        its client in one write, not one each (a short answer's dozen events reach the gateway in one or
        two reads)."""
        return self._reads()

    async def _reads(self) -> AsyncGenerator[list[bytes], None]:
        # Lines are split here, by bytes: one SSE event (a large tool call) can be longer than any
        # line reader's limit (aiohttp's was 64 KiB).
        # The body's reader is closed here when [DONE] ends the loop before it ended: dropped unfinished,
        # its finaliser had the loop close it in a task of its own, woken from outside (one more task,
        # loop turn and eventfd write on every stream).
        pending, failure = b"", None
        try:
            async with aclosing(self._response.iter_any()) as pieces:
                async for data in pieces:
                    payloads, pending, done = _split_events(pending + data)
                    if payloads:
                        yield payloads
                    if done:
                        return
        except (TimeoutError, OSError) as exc:
            failure = exc
        # what arrived before the failure still holds events the client should get
        payloads, _, done = _split_events(pending + self._response.buffered())
        if payloads:
            yield payloads
        if done:
            return
        if failure is not None:
            if isinstance(failure, TimeoutError):
                raise error_for_exception(failure) from failure
            raise UpstreamUnavailable(
                f"upstream dropped the stream before it ended: {type(failure).__name__}"
            ) from failure
        raise UpstreamUnavailable("upstream closed the stream before [DONE]")


#: The events that end a Responses stream (it has no ``[DONE]``).
RESPONSE_END_EVENTS = frozenset({"response.completed", "response.incomplete", "response.failed", "error"})


def event_type(payload: bytes) -> str:
    """The ``type`` of one Responses event payload ("" when it is not a JSON object with one)."""
    try:
        data = orjson.loads(payload)
    except orjson.JSONDecodeError:
        return ""
    return str(data.get("type") or "") if isinstance(data, dict) else ""


class _ResponseEventStream(_SSEStream):
    """A Responses event stream: it ends with its last event (``response.completed``, ...), not ``[DONE]``."""

    async def chunks(self) -> AsyncGenerator[bytes, None]:
        ended = False
        try:
            async with aclosing(super().chunks()) as payloads:  # closed when its last event ends it early
                async for payload in payloads:
                    yield payload
                    if event_type(payload) in RESPONSE_END_EVENTS:
                        ended = True
                        return
        except UpstreamUnavailable:
            if not ended:
                raise

    async def batches(self) -> AsyncIterator[list[bytes]]:
        """One event a batch: this stream ends at an event, which ``chunks`` finds."""
        async for payload in self.chunks():
            yield [payload]


class OpenAICompatUpstream:
    def __init__(self, config: UpstreamConfig) -> None:
        self._config = config
        self._pool = Pool(connect_timeout=config.connect_timeout_s, read_timeout=config.timeout_s)
        self._slots = Slots(config.max_connections, config.pool_timeout_s)

    async def _slot(self, model: ModelConfig) -> Callable[[], None]:
        """Wait up to ``upstream.pool_timeout_s`` for a connection to ``model``'s upstream; return its release."""
        return await self._slots.take(_base(model))

    def _prepare(
        self, model: ModelConfig, body: dict[str, Any], api_key: str | None, raw: bytes | None, path: str
    ) -> tuple[str, bytes, dict[str, str]]:
        base = _base(model)
        headers = {"content-type": "application/json"}
        if api_key:
            headers["authorization"] = f"Bearer {api_key}"
        payload = raw if raw is not None else orjson.dumps({**body, "model": model.upstream_model})
        return f"{base}{path}", payload, headers

    async def _send(
        self,
        model: ModelConfig,
        body: dict[str, Any],
        api_key: str | None,
        raw: bytes | None,
        path: str = "/chat/completions",
    ) -> Response:
        url, payload, headers = self._prepare(model, body, api_key, raw, path)
        attempt = 0
        tried: list[str] = []  # what each failed attempt got, for the request's record
        while True:
            try:
                response = await self._pool.post(url, payload, headers)
            except (TimeoutError, OSError) as exc:
                tried.append(f"{type(exc).__name__}: {exc}"[:ATTEMPT_CHARS])
                if attempt < self._config.max_retries and retryable_exception(exc):
                    attempt += 1
                    await asyncio.sleep(self._config.retry_backoff_s * attempt)
                    continue
                error = error_for_exception(exc)
                error.attempts = tuple(tried)
                raise error from exc
            if response.status < 400:
                return response
            content = await read_all(response)
            tried.append(f"{response.status}: {content[:ATTEMPT_CHARS].decode('utf-8', 'replace')}")
            if attempt < self._config.max_retries and self._retryable(response):
                attempt += 1
                await asyncio.sleep(self._delay(response, attempt))
                continue
            error = error_for_status(response.status, response.headers, content, response.reason)
            error.attempts = tuple(tried)
            raise error

    def _retryable(self, response: Response) -> bool:
        if response.status in RETRY_STATUSES:
            return True
        if response.status == 429:
            retry_after = _seconds(response.headers.get("retry-after"))
            return retry_after is not None and retry_after <= MAX_RETRY_AFTER_S
        return False

    def _delay(self, response: Response, attempt: int) -> float:
        retry_after = _seconds(response.headers.get("retry-after"))
        if retry_after is not None:
            return min(retry_after, MAX_RETRY_AFTER_S)
        return self._config.retry_backoff_s * attempt

    async def complete(
        self, model: ModelConfig, body: dict[str, Any], api_key: str | None, *, raw: bytes | None = None
    ) -> dict[str, Any]:
        data = await self._json(model, body, api_key, raw, "/chat/completions")
        if not isinstance(data, dict) or not isinstance(data.get("choices"), list):
            raise UpstreamUnavailable("upstream returned a body that is not a chat completion")
        return data

    async def _json(
        self, model: ModelConfig, body: dict[str, Any], api_key: str | None, raw: bytes | None, path: str
    ) -> Any:
        """One non-streamed call: the answer's JSON, its connection slot given back."""
        release = await self._slot(model)
        try:
            content = await read_all(await self._send(model, body, api_key, raw, path))
        finally:
            release()
        try:
            data = orjson.loads(content)
        except orjson.JSONDecodeError as exc:
            raise UpstreamUnavailable("upstream returned malformed JSON") from exc
        return data

    async def open_stream(
        self, model: ModelConfig, body: dict[str, Any], api_key: str | None, *, raw: bytes | None = None
    ) -> _SSEStream:
        release = await self._slot(model)
        try:
            return _SSEStream(await self._send(model, body, api_key, raw), release)
        except BaseException:
            release()
            raise

    async def responses_complete(self, model: ModelConfig, raw: bytes, api_key: str | None) -> dict[str, Any]:
        """``POST /responses`` with the body ``raw`` as it is (docs/responses.md, native forwarding)."""
        data = await self._json(model, {}, api_key, raw, "/responses")
        if not isinstance(data, dict) or data.get("object") != "response":
            raise UpstreamUnavailable("upstream returned a body that is not a Response")
        return data

    async def responses_stream(self, model: ModelConfig, raw: bytes, api_key: str | None) -> _SSEStream:
        """``POST /responses`` streamed: each event's ``data:`` payload; it ends with the response's last event."""
        release = await self._slot(model)
        try:
            return _ResponseEventStream(await self._send(model, {}, api_key, raw, "/responses"), release)
        except BaseException:
            release()
            raise

    async def close(self) -> None:
        await self._pool.close()


def _base(model: ModelConfig) -> str:
    """The upstream a model's requests go to: its pool of connections is this base's own."""
    return (model.api_base or DEFAULT_API_BASE).rstrip("/")


def _seconds(value: str | None) -> float | None:
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        return None
