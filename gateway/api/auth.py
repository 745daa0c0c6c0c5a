"""Who is calling: gateway keys, admin keys, and the pass-through provider key.

The config never holds a key, only its sha256 hex digest (``ventana keys hash``), so a
leaked config file or database grants nothing. A request presents its key as
``Authorization: Bearer <key>``; in pass-through mode that header carries the client's
own *provider* key (forwarded upstream, never stored or logged), so with auth on the
gateway key moves to ``X-Ventana-Key``.

Two FastAPI dependencies are the whole surface other modules use:

- ``require_client``: any valid gateway or admin key (or anyone when auth is off);
- ``require_admin``: an admin key. Every administrative route (the UI, admin APIs) uses
  it, for example ``APIRouter(prefix="/ui", dependencies=[Depends(require_admin)])``.
  With ``auth.admin_keys`` empty and auth off, admin surfaces answer loopback clients
  only: not through a reverse proxy (which makes every client look local: any of
  ``X-Forwarded-For``, ``Forwarded``, ``X-Real-IP`` refuses), and only under a loopback
  ``Host`` or one in ``auth.allowed_hosts`` (a page on a rebound DNS name reaches 127.0.0.1
  with its own name as the Host). With auth on and no admin keys they answer nobody.

Digests are compared by set membership: the timing of a lookup reveals at most
something about the sha256 of a guess, never about a stored key.
"""

from __future__ import annotations

import hashlib
import ipaddress
import secrets
from collections.abc import Mapping
from dataclasses import dataclass
from urllib.parse import urlsplit

from starlette.requests import Request

from gateway.config import AuthConfig
from gateway.errors import AuthError, PermissionDenied

#: With ``auth.passthrough`` and ``auth.enabled``, the gateway key travels in this header.
GATEWAY_KEY_HEADER = "x-ventana-key"
KEY_PREFIX = "vk-"
ANONYMOUS = "anonymous"


def hash_key(key: str) -> str:
    """The sha256 hex digest stored in ``auth.keys``; changing it invalidates every configured key."""
    return hashlib.sha256(key.encode("utf-8")).hexdigest()


def new_key() -> str:
    """A fresh random gateway key (256 bits of entropy)."""
    return KEY_PREFIX + secrets.token_urlsafe(32)


def caller_of(key: str | None) -> str:
    """The short, non-reversible name of a caller used for grouping and rate limiting."""
    return hash_key(key)[:12] if key else ANONYMOUS


def bearer(headers: Mapping[str, str]) -> str | None:
    value = headers.get("authorization", "")
    if value[:7].lower() != "bearer ":
        return None
    return value[7:].strip() or None


@dataclass(frozen=True, slots=True)
class Principal:
    """An admitted caller: ``caller`` is a short hash of its key, never the key."""

    caller: str
    admin: bool = False


class Access:
    """Decide whether a request may use the gateway, and whether it may administer it."""

    def __init__(self, config: AuthConfig) -> None:
        self.config = config
        self._admin = frozenset(config.admin_keys)
        self.admin_digests = self._admin
        self._clients = frozenset(config.keys) | self._admin

    def gateway_key(self, headers: Mapping[str, str]) -> str | None:
        if self.config.passthrough:
            return headers.get(GATEWAY_KEY_HEADER) or None
        return bearer(headers) or headers.get("x-api-key") or None  # x-api-key: Anthropic's SDKs

    def client(self, headers: Mapping[str, str]) -> Principal:
        """Admit a chat/models request, or raise AuthError (401)."""
        key = self.gateway_key(headers)
        if not self.config.enabled:
            return Principal(caller=caller_of(key or bearer(headers)))
        if key is None:
            where = (
                f"an {GATEWAY_KEY_HEADER} header" if self.config.passthrough else "an 'Authorization: Bearer' header"
            )
            raise AuthError(f"missing gateway key: send it in {where}")
        digest = hash_key(key)
        if digest not in self._clients:
            raise AuthError("invalid gateway key")
        return Principal(caller=digest[:12], admin=digest in self._admin)

    def admin(self, headers: Mapping[str, str], client_host: str | None) -> Principal:
        """Admit an administrative request, or raise AuthError (401) / PermissionDenied (403)."""
        if not self._admin:
            if not self.config.enabled and _is_loopback(client_host) and self._local_name(headers.get("host")):
                return Principal(caller="loopback", admin=True)
            raise PermissionDenied(
                "admin surfaces need an admin key: set auth.admin_keys (or, with auth off, call from loopback)"
            )
        key = self.gateway_key(headers) or bearer(headers)
        if key is None:
            raise AuthError("missing admin key: send it as 'Authorization: Bearer <key>'")
        digest = hash_key(key)
        if digest in self._admin:
            return Principal(caller=digest[:12], admin=True)
        if digest in self._clients:
            raise PermissionDenied("this key may call the gateway but not administer it")
        raise AuthError("invalid admin key")

    def _local_name(self, host: str | None) -> bool:
        """Whether the Host header names this machine (or a configured name), port ignored.

        No Host at all is not a browser (every browser sends one), so it is not refused here."""
        if not host:
            return True
        try:
            name = urlsplit("//" + host).hostname or ""  # [::1]:8080 -> ::1, lower-cased
        except ValueError:
            return False
        return name in LOCAL_NAMES or name in {h.lower() for h in self.config.allowed_hosts}


#: Host names that can only mean this machine.
LOCAL_NAMES = frozenset({"localhost", "127.0.0.1", "::1"})


def _is_loopback(host: str | None) -> bool:
    if not host:
        return False
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return host == "localhost"


def _access(request: Request) -> Access:
    access: Access = request.app.state.access
    return access


async def require_client(request: Request) -> Principal:
    """FastAPI dependency: a valid gateway key (when auth is on)."""
    return _access(request).client(request.headers)


#: Headers a reverse proxy adds: a request carrying one came from elsewhere, whatever its socket says.
PROXY_HEADERS = ("x-forwarded-for", "forwarded", "x-real-ip")


def socket_host(request: Request) -> str | None:
    """The peer's address, or None when a proxy header says the request came from elsewhere."""
    proxied = any(h in request.headers for h in PROXY_HEADERS)
    return request.client.host if request.client and not proxied else None


async def require_admin(request: Request) -> Principal:
    """FastAPI dependency: an admin key. Every administrative route must depend on it."""
    return _access(request).admin(request.headers, socket_host(request))
