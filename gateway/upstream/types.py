"""The seam between the API layer and a provider: a non-streamed answer, or a stream of chunks."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Protocol


class UpstreamStream(Protocol):
    """An open stream whose headers arrived with a success status.

    ``chunks`` yields each SSE ``data:`` payload (bytes, without the prefix), stopping
    at ``[DONE]``; it raises an ``UpstreamError`` if the provider drops the stream.
    """

    def chunks(self) -> AsyncIterator[bytes]: ...

    async def aclose(self) -> None: ...


#: Client headers that travel to an Anthropic-format upstream as they came (the key is the gateway's to set).
#: Here, not in ``anthropic_native``, so naming them does not import that upstream at start-up.
PASSED_HEADERS = ("anthropic-version", "anthropic-beta")
