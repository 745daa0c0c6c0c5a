"""The request path's HTTP/1.1 client against real sockets: each way an answer can be framed, kept or cut.

A small asyncio server answers each request with the bytes a test scripts, so every framing
(length, chunked, read to the close, gzip), every keep-alive decision and every failure
(a close mid-body, silence, a malformed head) is what the client really reads off a socket.
TLS is checked against a certificate made here and trusted through ``SSL_CERT_FILE``.
"""

from __future__ import annotations

import asyncio
import datetime
import gc
import gzip
import ssl
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from gateway.upstream import http1
from gateway.upstream.http1 import Pool, ReadTimeout, split_url

Script = Callable[[int], bytes | None]  # the n-th request to the server -> the answer's bytes (None: hang)


class Server:
    def __init__(self, script: Script) -> None:
        self.script = script
        self.connections = 0
        self.requests: list[bytes] = []

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = int(head.lower().split(b"content-length: ", 1)[1].split(b"\r\n", 1)[0])
                self.requests.append(head + await reader.readexactly(length))
                answer = self.script(len(self.requests) - 1)
                if answer is None:  # silent until the client hangs up
                    await reader.read()
                    return
                close = answer.endswith(b"<close>")  # close after it, without saying so
                writer.write(answer.removesuffix(b"<close>"))
                await writer.drain()
                if close or b"connection: close" in answer.lower():
                    break
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()


@asynccontextmanager
async def serve(script: Script, context: ssl.SSLContext | None = None) -> AsyncIterator[tuple[Server, str]]:
    server = Server(script)
    listener = await asyncio.start_server(server.handle, "127.0.0.1", 0, ssl=context)
    port = listener.sockets[0].getsockname()[1]
    scheme = "https" if context else "http"
    host = "localhost" if context else "127.0.0.1"
    try:
        yield server, f"{scheme}://{host}:{port}/v1/chat/completions"
    finally:
        listener.close()


def sized(body: bytes, *extra: str) -> bytes:
    head = "".join(f"{h}\r\n" for h in extra)
    return f"HTTP/1.1 200 OK\r\ncontent-length: {len(body)}\r\n{head}\r\n".encode() + body


def chunked(*pieces: bytes) -> bytes:
    out = b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n"
    for piece in pieces:
        out += f"{len(piece):x}\r\n".encode() + piece + b"\r\n"
    return out + b"0\r\n\r\n"


def pool(read_timeout: float = 5.0) -> Pool:
    return Pool(connect_timeout=5.0, read_timeout=read_timeout)


async def post(p: Pool, url: str, body: bytes = b'{"q":1}') -> tuple[int, bytes]:
    response = await p.post(url, body, {"content-type": "application/json", "authorization": "Bearer sk-x"})
    try:
        return response.status, await response.read()
    finally:
        response.release()


async def test_a_sized_answer_is_read_and_its_connection_carries_the_next_request() -> None:
    async with serve(lambda n: sized(b'{"n":%d}' % n)) as (server, url):
        p = pool()
        assert await post(p, url) == (200, b'{"n":0}')
        assert await post(p, url) == (200, b'{"n":1}')
        assert server.connections == 1
        first = server.requests[0]
        assert first.startswith(b"POST /v1/chat/completions HTTP/1.1\r\n")
        assert f"host: 127.0.0.1:{url.split(':')[2].split('/')[0]}".encode() in first
        assert b"authorization: Bearer sk-x\r\n" in first and first.endswith(b'\r\n\r\n{"q":1}')
        await p.close()


async def test_chunked_gzip_and_read_to_the_close_bodies_come_whole() -> None:
    packed = gzip.compress(b'{"gz":true}')
    answers = [
        chunked(b'{"a":', b"1}"),
        sized(packed, "content-encoding: gzip"),
        b"HTTP/1.1 200 OK\r\nconnection: close\r\n\r\n" + b'{"until":"close"}',
    ]
    async with serve(lambda n: answers[n % 3]) as (server, url):
        p = pool()
        assert await post(p, url) == (200, b'{"a":1}')
        assert await post(p, url) == (200, b'{"gz":true}')
        assert await post(p, url) == (200, b'{"until":"close"}')
        assert await post(p, url) == (200, b'{"a":1}')  # after a close: a new connection
        assert server.connections == 2
        await p.close()


async def test_a_stream_arrives_in_pieces_and_a_close_mid_body_is_an_error_after_them() -> None:
    cut = b"HTTP/1.1 200 OK\r\ncontent-length: 100\r\n\r\n" + b"data: 1\n\n<close>"
    async with serve(lambda n: cut) as (_, url):
        p = pool()
        response = await p.post(url, b"{}", {})
        got = b""
        with pytest.raises(http1.Disconnected):
            async for data in response.iter_any():
                got += data
        response.release()
        assert got.startswith(b"data: 1\n\n")
        await p.close()


async def test_a_compressed_stream_is_read_decoded_piece_by_piece() -> None:
    events = b"".join(b"data: %d\n\n" % i for i in range(200))
    packed = gzip.compress(events)
    answer = chunked(packed[:40], packed[40:]).replace(b"200 OK\r\n", b"200 OK\r\ncontent-encoding: gzip\r\n", 1)
    async with serve(lambda n: answer) as (_, url):
        p = pool()
        response = await p.post(url, b"{}", {})
        got = b"".join([data async for data in response.iter_any()])
        response.release()
        assert got == events
        await p.close()


async def test_a_connection_the_upstream_closed_after_answering_is_not_reused() -> None:
    async with serve(lambda n: sized(b"{}") + b"<close>") as (server, url):
        p = pool()
        assert await post(p, url) == (200, b"{}")
        await asyncio.sleep(0.05)  # the close reaches the client
        assert await post(p, url) == (200, b"{}")
        assert server.connections == 2
        await p.close()


async def test_an_upstream_that_goes_quiet_is_a_read_timeout_and_its_connection_is_not_reused() -> None:
    async with serve(lambda n: None if n == 0 else sized(b"{}")) as (server, url):
        p = pool(read_timeout=0.2)
        with pytest.raises(ReadTimeout):
            await post(p, url)
        assert await post(p, url) == (200, b"{}")
        assert server.connections == 2
        await p.close()


async def test_an_interim_answer_is_passed_over_for_the_one_that_follows() -> None:
    hints = b"HTTP/1.1 103 Early Hints\r\nlink: </style.css>; rel=preload\r\n\r\n"
    async with serve(lambda n: hints + sized(b'{"final":1}')) as (_, url):
        p = pool()
        response = await p.post(url, b"{}", {})
        assert (response.status, "link" in response.headers) == (200, False)
        assert await response.read() == b'{"final":1}'
        response.release()
        assert await post(p, url) == (200, b'{"final":1}')
        await p.close()


async def test_an_answer_dropped_without_release_closes_its_connection() -> None:
    async with serve(lambda n: chunked(b"data: 1\n\n", b"data: 2\n\n")) as (server, url):
        p = pool()
        response = await p.post(url, b"{}", {})
        conn = response._conn
        del response
        gc.collect()
        assert conn.closed
        assert await post(p, url) == (200, b"data: 1\n\ndata: 2\n\n")
        assert server.connections == 2
        await p.close()


async def test_a_malformed_answer_is_a_protocol_error() -> None:
    async with serve(lambda n: b"SMTP ready\r\n\r\n") as (_, url):
        with pytest.raises(http1.ProtocolError):
            await post(pool(), url)


async def test_an_error_status_is_an_answer_with_its_headers() -> None:
    answer = b"HTTP/1.1 429 Too Many Requests\r\nretry-after: 1\r\ncontent-length: 2\r\n\r\n{}"
    async with serve(lambda n: answer) as (_, url):
        p = pool()
        response = await p.post(url, b"{}", {})
        assert (response.status, response.reason, response.headers["retry-after"]) == (429, "Too Many Requests", "1")
        assert await response.read() == b"{}"
        response.release()
        await p.close()


async def test_an_idle_connection_past_its_age_is_not_reused(monkeypatch: pytest.MonkeyPatch) -> None:
    async with serve(lambda n: sized(b"{}")) as (server, url):
        p = pool()
        await post(p, url)
        monkeypatch.setattr(http1, "IDLE_S", 0.0)
        await post(p, url)
        assert server.connections == 2
        await p.close()


async def test_a_connection_refused_is_a_connection_error() -> None:
    listener = await asyncio.start_server(lambda r, w: None, "127.0.0.1", 0)
    port = listener.sockets[0].getsockname()[1]
    listener.close()
    await listener.wait_closed()
    with pytest.raises(ConnectionError):
        await post(pool(), f"http://127.0.0.1:{port}/v1")


def test_a_header_with_a_line_break_is_refused_before_anything_is_sent() -> None:
    origin, target = split_url("http://example.com/v1/chat/completions?x=1")
    assert (origin.host_header, target) == ("example.com", "/v1/chat/completions?x=1")
    with pytest.raises(ValueError):
        http1._head(target, origin, {"authorization": "Bearer a\r\nx-evil: 1"}, 0)


async def test_https_upstreams_are_verified_against_the_trust_store(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cert, key = _self_signed(tmp_path)
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(cert, key)
    async with serve(lambda n: sized(b'{"tls":1}'), context) as (_, url):
        with pytest.raises(ssl.SSLCertVerificationError):  # not trusted: refused
            await post(pool(), url)
        monkeypatch.setenv("SSL_CERT_FILE", str(cert))
        p = pool()
        assert await post(p, url) == (200, b'{"tls":1}')
        assert await post(p, url) == (200, b'{"tls":1}')
        await p.close()


def _self_signed(tmp: Path) -> tuple[Path, Path]:
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "localhost")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(days=1))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.SubjectAlternativeName([x509.DNSName("localhost")]), critical=False)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    cert_path, key_path = tmp / "cert.pem", tmp / "key.pem"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    return cert_path, key_path


async def test_a_body_that_follows_its_head_later_is_read_whole_like_one_that_came_with_it() -> None:
    """``read`` takes a body that came whole with its head as it is, and waits for one still on its way."""

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        for late in (True, False):
            head = await reader.readuntil(b"\r\n\r\n")
            await reader.readexactly(int(head.lower().split(b"content-length: ", 1)[1].split(b"\r\n", 1)[0]))
            body = b'{"late":%s}' % (b"true" if late else b"false")
            writer.write(b"HTTP/1.1 200 OK\r\ncontent-length: %d\r\n\r\n" % len(body))
            if late:
                await writer.drain()
                await asyncio.sleep(0.05)
            writer.write(body)
            await writer.drain()
        writer.close()

    listener = await asyncio.start_server(handle, "127.0.0.1", 0)
    url = f"http://127.0.0.1:{listener.sockets[0].getsockname()[1]}/v1/chat/completions"
    try:
        p = pool()
        assert await post(p, url) == (200, b'{"late":true}')
        assert await post(p, url) == (200, b'{"late":false}')
        await p.close()
    finally:
        listener.close()
