"""The protocol ``ventana serve`` gives uvicorn writes a response's head and body in one write."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from uvicorn.config import Config
from uvicorn.server import ServerState

from gateway.api.http_protocol import HTTP_PROTOCOL

pytestmark = pytest.mark.skipif(isinstance(HTTP_PROTOCOL, str), reason="httptools is not installed")


class Recording(asyncio.Transport):
    """A transport that keeps each write call's bytes (one entry per call: one entry is one segment)."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: list[bytes] = []
        self.closed = False

    def write(self, data: Any) -> None:
        self.calls.append(bytes(data))

    def writelines(self, list_of_data: Any) -> None:
        self.calls.append(b"".join(bytes(d) for d in list_of_data))

    def is_closing(self) -> bool:
        return self.closed

    def close(self) -> None:
        self.closed = True

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return {"sockname": ("127.0.0.1", 8000), "peername": ("127.0.0.1", 50000)}.get(name, default)

    def pause_reading(self) -> None:
        pass

    def resume_reading(self) -> None:
        pass


async def _serve(app: Any, request: bytes, *, turns: int = 20, transport: Recording | None = None) -> Recording:
    """Feed ``request`` to the protocol on a recording transport (``transport``, for an app that looks at it
    while it answers) and let the app answer."""
    assert not isinstance(HTTP_PROTOCOL, str)
    config = Config(app=app, lifespan="off", log_level="warning")
    protocol: Any = HTTP_PROTOCOL(config=config, server_state=ServerState(), app_state={})  # type: ignore[call-arg]
    transport = transport or Recording()
    protocol.connection_made(transport)
    protocol.data_received(request)
    for _ in range(turns):
        await asyncio.sleep(0)
    protocol.connection_lost(None)
    return transport


POST = b"POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\ncontent-length: 2\r\ncontent-type: application/json\r\n\r\n{}"


async def test_a_response_goes_out_in_one_write_head_and_body_together() -> None:
    async def app(scope: Any, receive: Any, send: Any) -> None:
        await receive()
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-length", b"11")]})
        await send({"type": "http.response.body", "body": b'{"ok":true}'})

    transport = await _serve(app, POST)
    assert len(transport.calls) == 1  # uvicorn's own protocol: two (the head, then the body)
    head, _, body = transport.calls[0].partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 200 OK") and b"content-length: 11" in head
    assert body == b'{"ok":true}'


async def test_a_stream_s_head_goes_out_on_the_next_turn_without_waiting_for_its_first_event() -> None:
    first_event = asyncio.Event()
    seen_before_event: list[bytes] = []
    transport = Recording()

    async def app(scope: Any, receive: Any, send: Any) -> None:
        await receive()
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/event-stream")]})
        await first_event.wait()
        await send({"type": "http.response.body", "body": b"data: 1\n\n", "more_body": True})
        await send({"type": "http.response.body", "body": b"data: [DONE]\n\n", "more_body": False})

    async def release() -> None:
        for _ in range(5):
            await asyncio.sleep(0)
        seen_before_event.extend(transport.calls)
        first_event.set()

    releasing = asyncio.ensure_future(release())
    await _serve(app, POST, transport=transport)
    await releasing
    assert len(seen_before_event) == 1 and seen_before_event[0].startswith(b"HTTP/1.1 200 OK")
    data = b"".join(transport.calls)
    assert data.index(b"HTTP/1.1 200") < data.index(b"data: 1") < data.index(b"data: [DONE]")


async def test_100_continue_is_not_held_back() -> None:
    request = POST.replace(b"content-type", b"expect: 100-continue\r\ncontent-type").replace(b"\r\n\r\n{}", b"\r\n\r\n")
    calls_when_read: list[list[bytes]] = []
    transport = Recording()

    async def app(scope: Any, receive: Any, send: Any) -> None:
        calls_when_read.append([])
        message = asyncio.ensure_future(receive())
        for _ in range(3):
            await asyncio.sleep(0)
        calls_when_read[0] = list(transport.calls)
        message.cancel()
        await send({"type": "http.response.start", "status": 204, "headers": []})
        await send({"type": "http.response.body", "body": b""})

    await _serve(app, request, transport=transport)
    assert calls_when_read[0] == [b"HTTP/1.1 100 Continue\r\n\r\n"]
    assert transport.calls[1].startswith(b"HTTP/1.1 204")


async def test_closing_writes_a_held_head_first() -> None:
    async def app(scope: Any, receive: Any, send: Any) -> None:
        await receive()
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-length", b"5")]})
        raise RuntimeError("the app failed after its head")  # uvicorn closes the connection

    transport = await _serve(app, POST)
    assert transport.closed
    assert len(transport.calls) == 1 and transport.calls[0].startswith(b"HTTP/1.1 200 OK")


def test_ventana_serve_hands_the_protocol_to_uvicorn(monkeypatch: pytest.MonkeyPatch, tmp_path: Any) -> None:
    from gateway import serve
    from gateway.config import parse_settings

    seen: dict[str, Any] = {}
    monkeypatch.setattr(serve.uvicorn, "run", lambda *a, **k: seen.update(k))
    monkeypatch.setattr(serve, "build_dependencies", lambda settings: {})
    models = [{"name": "m", "litellm_model": "openai/m", "api_base": "http://127.0.0.1:9/v1"}]
    settings = parse_settings({"models": models, "database_url": f"sqlite:///{tmp_path}/store.db"})
    serve.run(settings, host="127.0.0.1", port=9, log_level="warning")
    assert seen["http"] is HTTP_PROTOCOL
