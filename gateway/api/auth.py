"""Who may administer the gateway: admin keys, loopback, allowed hosts. Client keys: ``admission.py``.

The config never holds a key, only its sha256 hex digest (``ventana keys hash``), so a
leaked config file or database grants nothing. A request presents its key as
``Authorization: Bearer <key>``; in pass-through mode that header carries the client's
own *provider* key (forwarded upstream, never stored or logged), so with auth on the
gateway key moves to ``X-Ventana-Key``.

Two FastAPI dependencies are the whole surface other modules use:

- ``admission.require_client``: any valid gateway or admin key (or anyone when auth is off),
  as the request's ``Principal`` (``admission.py`` is the one place a caller is named);
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

import ipaddress
import secrets
from collections.abc import Mapping
from urllib.parse import urlsplit

from starlette.requests import Request

from gateway.api.admission import Admission, Principal, bearer
from gateway.api.admission import hash_key as hash_key
from gateway.config import AuthConfig
from gateway.errors import AuthError, PermissionDenied

KEY_PREFIX = "vk-"


def new_key() -> str:
    """A fresh random gateway key (256 bits of entropy)."""
    return KEY_PREFIX + secrets.token_urlsafe(32)


class Access:
    """Decide whether a request may administer the gateway (``admission.Admission`` admits clients)."""

    def __init__(self, config: AuthConfig) -> None:
        self.config = config
        self._admin = frozenset(config.admin_keys)
        self.admin_digests = self._admin
        self._admission = Admission(config)  # client keys: admission.py names the caller, not this class

    def admin(self, headers: Mapping[str, str], client_host: str | None) -> Principal:
        """Admit an administrative request, or raise AuthError (401) / PermissionDenied (403)."""
        if not self._admin:
            if not self.config.enabled and _is_loopback(client_host) and self._local_name(headers.get("host")):
                return Principal(caller="loopback", admin=True)
            raise PermissionDenied(
                "admin surfaces need an admin key: set auth.admin_keys (or, with auth off, call from loopback)"
            )
        key = self._admission.gateway_key(headers) or bearer(headers)
        if key is None:
            raise AuthError("missing admin key: send it as 'Authorization: Bearer <key>'")
        digest = hash_key(key)
        if digest in self._admin:
            return Principal(caller=digest[:12], admin=True)
        if self._admission.known(digest):
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


#: Headers a reverse proxy adds: a request carrying one came from elsewhere, whatever its socket says.
PROXY_HEADERS = ("x-forwarded-for", "forwarded", "x-real-ip")


def socket_host(request: Request) -> str | None:
    """The peer's address, or None when a proxy header says the request came from elsewhere."""
    proxied = any(h in request.headers for h in PROXY_HEADERS)
    return request.client.host if request.client and not proxied else None


async def require_admin(request: Request) -> Principal:
    """FastAPI dependency: an admin key. Every administrative route must depend on it."""
    return _access(request).admin(request.headers, socket_host(request))
