"""The seam between the API layer and a provider: a non-streamed answer, or a stream of chunks."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any, Protocol

from gateway.config import ModelConfig


class UpstreamStream(Protocol):
    """An open stream whose headers arrived with a success status.

    ``chunks`` yields each SSE ``data:`` payload (bytes, without the prefix), stopping
    at ``[DONE]``; it raises an ``UpstreamError`` if the provider drops the stream.
    """

    def chunks(self) -> AsyncIterator[bytes]: ...

    async def aclose(self) -> None: ...


class Upstream(Protocol):
    """Forwards a chat body. ``raw``, when given, is ``body`` already encoded with the provider's
    model id (the client's own bytes): an upstream that sends JSON may send it as it is."""

    async def complete(
        self, model: ModelConfig, body: dict[str, Any], api_key: str | None, *, raw: bytes | None = None
    ) -> dict[str, Any]: ...

    async def open_stream(
        self, model: ModelConfig, body: dict[str, Any], api_key: str | None, *, raw: bytes | None = None
    ) -> UpstreamStream: ...

    async def close(self) -> None: ...
