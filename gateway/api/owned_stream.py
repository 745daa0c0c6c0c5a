"""An event stream that owns its request: it finishes it exactly once, however the stream ends.

A streamed request used to be recorded in its relay generator's ``finally``, which never runs
when the generator is closed before its first step (the client hung up while the response was
starting, or a door's wrapper was closed before it reached the chat stream): the request was
forwarded and billed but never recorded, and its upstream connection was left to the garbage
collector. Here the stream is an object, not a bare generator:

- ``abandon()`` is synchronous and idempotent: it hands the request's record over (as the client
  having gone, unless the stream already finished it) without awaiting anything, so it runs
  even inside a task that is being cancelled;
- ``aclose()`` closes the generator, then abandons (a no-op if the generator finished the
  request) and releases the upstream connection, whether or not iteration ever started.

``EventStreamResponse`` calls ``abandon()`` and ``aclose()`` in its ``finally``, so every way a
response can end reaches them. A door that re-encodes a stream (Responses, Messages) wraps its
generator with ``OwnedStream.around(gen, inner)``, so closing the outer one closes the chat stream.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable


async def _nothing() -> None:
    return None


class OwnedStream:
    """``events`` plus what finishes its request (``abandon``) and frees its upstream (``release``)."""

    def __init__(
        self,
        events: AsyncGenerator[bytes, None],
        *,
        abandon: Callable[[], None],
        release: Callable[[], Awaitable[None]] = _nothing,
    ) -> None:
        self._events = events
        self._abandon = abandon
        self._release = release
        self._released = False

    @classmethod
    def around(cls, events: AsyncGenerator[bytes, None], inner: AsyncIterator[bytes]) -> OwnedStream:
        """A door's re-encoding of ``inner``: abandoning or closing it abandons and closes ``inner``."""
        abandon = getattr(inner, "abandon", None)
        aclose = getattr(inner, "aclose", None)
        return cls(events, abandon=abandon if callable(abandon) else _no_abandon, release=aclose or _nothing)

    def __aiter__(self) -> AsyncGenerator[bytes, None]:
        """The generator itself: iterating goes straight to it, with no method of this class between (each
        layer was a coroutine on every step of a stream); ``abandon`` and ``aclose`` stay on this object."""
        return self._events

    async def __anext__(self) -> bytes:
        return await self._events.__anext__()

    def abandon(self) -> None:
        """Finish the request now if the stream has not (idempotent, never awaits)."""
        self._abandon()

    async def aclose(self) -> None:
        try:
            await self._events.aclose()
        finally:
            self._abandon()
            if not self._released:
                self._released = True
                await self._release()


def _no_abandon() -> None:
    return None
