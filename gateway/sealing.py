"""Seal what the gateway hands a client to bring back later: encrypted, authenticated, one caller's.

A Responses ``compaction`` item carries ``encrypted_content`` that the client sends back in ``input`` in place
of the turns it replaced. The gateway puts its summary of those turns there, sealed with Fernet (AES-128-CBC
and HMAC-SHA256, from ``cryptography``) under the gateway's key, with the caller it was made for inside: a
tampered token, one from another gateway, or one another caller replays is refused with a clear 400. The
token is self-contained, so it survives restarts and works on every replica that shares the key.

The key is ``VENTANA_SECRET_KEY`` (a Fernet key: 32 url-safe base64 bytes; give every replica the same), else
the file ``secret_key_file`` names (``ventana-secret.key`` beside the working directory), created with mode
0600 on first start.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

import orjson
from cryptography.fernet import Fernet, InvalidToken

from gateway.errors import RequestError

ENV_KEY = "VENTANA_SECRET_KEY"
#: Every token the gateway seals starts with this, so a provider's own sealed item (OpenAI's compaction
#: items) is told apart and passed through to that provider untouched.
PREFIX = "ventana.v1."


def sealed_here(token: Any) -> bool:
    return isinstance(token, str) and token.startswith(PREFIX)


def load_key(key_file: str | os.PathLike[str]) -> bytes:
    """The gateway's sealing key: the environment's, else the file's, else a new one written to the file."""
    given = os.environ.get(ENV_KEY)
    if given:
        return given.encode()
    path = Path(key_file)
    if path.is_file():
        return path.read_bytes().strip()
    key = Fernet.generate_key()
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "wb") as out:
        out.write(key + b"\n")
    return key


class Sealer:
    """Seal and open payloads for one caller under one key."""

    def __init__(self, key: bytes) -> None:
        self._fernet = Fernet(key)

    def seal(self, kind: str, caller: str, payload: dict[str, Any]) -> str:
        body = {"kind": kind, "caller": caller, "at": int(time.time()), "payload": payload}
        return PREFIX + self._fernet.encrypt(orjson.dumps(body)).decode()

    def open(self, kind: str, caller: str, token: Any, *, param: str) -> dict[str, Any]:
        """The payload ``token`` seals, or a RequestError: not ours, tampered, another kind or another caller's."""
        if not isinstance(token, str) or not token:
            raise RequestError(f"'{param}' must be a non-empty string", param=param, code="invalid_encrypted_content")
        try:
            body = orjson.loads(self._fernet.decrypt(token.removeprefix(PREFIX).encode()))
        except (InvalidToken, ValueError, orjson.JSONDecodeError) as exc:
            raise RequestError(
                f"'{param}' was not made by this gateway or has been altered",
                param=param,
                code="invalid_encrypted_content",
            ) from exc
        if body.get("kind") != kind or body.get("caller") != caller:
            raise RequestError(
                f"'{param}' was sealed for another caller or purpose and cannot be used here",
                param=param,
                code="invalid_encrypted_content",
            )
        payload = body.get("payload")
        return payload if isinstance(payload, dict) else {}
