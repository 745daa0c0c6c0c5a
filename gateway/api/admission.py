"""Admission: the request's credentials, turned once into the ``Principal`` every later step uses.

Issue 35: the caller used to be worked out in four places (the chat route from ``Authorization``
only, the Messages door from the provider key in pass-through mode, the concurrency cap and auth
each from their own reading of the headers). A key sent as ``x-api-key`` was admitted by auth and
then scoped as ``anonymous``; two tenants sharing a provider key on ``/v1/messages`` shared one
session. Now ``Admission.principal`` is the only reader of key headers for client requests, and
sessions, memory, stored responses, served tools, rate limits, the concurrency cap and records
all take ``Principal.caller`` from it.

Which header carries what (the same on every door):

- ``X-Ventana-Key``: always the gateway key when present.
- without pass-through: ``Authorization: Bearer`` else ``x-api-key`` (Anthropic's SDKs) is the
  gateway key;
- with pass-through (``auth.passthrough``): ``Authorization: Bearer`` else ``x-api-key`` is the
  client's *provider* key, forwarded upstream and never the caller (tenants may share it); the
  gateway key travels in ``X-Ventana-Key``. With auth off and no ``X-Ventana-Key`` the provider
  key is all that tells clients apart, so its digest names the caller.

The principal is computed once per request and kept in the ASGI scope (``SCOPE_KEY``), so the
concurrency middleware, the route and the doors read the same object.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import lru_cache

from starlette.requests import Request
from starlette.types import Scope

from gateway.config import AuthConfig
from gateway.errors import AuthError

#: With ``auth.passthrough`` and ``auth.enabled``, the gateway key travels in this header.
GATEWAY_KEY_HEADER = "x-ventana-key"
ANONYMOUS = "anonymous"
#: Where the admitted principal is kept for the rest of the request.
SCOPE_KEY = "ventana.principal"
#: Distinct keys whose digests are remembered (``hash_key``): tenants' keys, far fewer in practice.
KEYS_REMEMBERED = 1024


@lru_cache(maxsize=KEYS_REMEMBERED)
def hash_key(key: str) -> str:
    """The sha256 hex digest stored in ``auth.keys``; changing it invalidates every configured key.

    Remembered per key: a client sends the same key on every request, and a sha256 after the loop sat
    idle is ~30-40 us on a VM whose idle vCPU halts (OpenSSL's code is cold), for every request. The
    keys stay in this process's memory only, as they do while their requests run."""
    return hashlib.sha256(key.encode("utf-8", "surrogatepass")).hexdigest()


def bearer(headers: Mapping[str, str]) -> str | None:
    value = headers.get("authorization", "")
    if value[:7].lower() != "bearer ":
        return None
    return value[7:].strip() or None


@dataclass(frozen=True, slots=True)
class Principal:
    """An admitted caller.

    ``caller`` is a short hash of its gateway key (or ``anonymous``), never the key; ``key_header``
    names the header the gateway key came in (None when none was sent); ``passthrough`` says the
    client's own provider key is forwarded, and ``provider_key`` is that key: forwarded upstream
    only, never stored, logged or printed (``repr`` leaves it out).
    """

    caller: str
    key_header: str | None = None
    passthrough: bool = False
    admin: bool = False
    provider_key: str | None = field(default=None, repr=False, compare=False)


def _named_key(headers: Mapping[str, str], passthrough: bool) -> tuple[str | None, str | None]:
    """The gateway key and the header it came in."""
    key = headers.get(GATEWAY_KEY_HEADER) or None
    if key is not None or passthrough:
        return key, GATEWAY_KEY_HEADER if key else None
    found = bearer(headers)
    if found is not None:
        return found, "authorization"
    found = headers.get("x-api-key") or None
    return found, "x-api-key" if found else None


def provider_key_of(headers: Mapping[str, str]) -> str | None:
    """The client's provider key in pass-through mode: ``Authorization: Bearer``, else ``x-api-key``."""
    return bearer(headers) or headers.get("x-api-key") or None


class Admission:
    """Admit a client request (chat, Responses, Messages, models) or raise AuthError (401)."""

    def __init__(self, config: AuthConfig) -> None:
        self.config = config
        self._admin = frozenset(config.admin_keys)
        self._clients = frozenset(config.keys) | self._admin

    def gateway_key(self, headers: Mapping[str, str]) -> str | None:
        return _named_key(headers, self.config.passthrough)[0]

    def known(self, digest: str) -> bool:
        return digest in self._clients

    def principal(self, headers: Mapping[str, str]) -> Principal:
        passthrough = self.config.passthrough
        key, header = _named_key(headers, passthrough)
        provider = provider_key_of(headers) if passthrough else None
        if not self.config.enabled:
            who = key or provider  # auth off: whatever key tells clients apart, else one anonymous caller
            return Principal(
                caller=hash_key(who)[:12] if who else ANONYMOUS,
                key_header=header or ("provider" if who else None),
                passthrough=passthrough,
                provider_key=provider,
            )
        if key is None:
            where = (
                f"an {GATEWAY_KEY_HEADER} header" if passthrough else "an 'Authorization: Bearer' header (or x-api-key)"
            )
            raise AuthError(f"missing gateway key: send it in {where}")
        digest = hash_key(key)
        if digest not in self._clients:
            raise AuthError("invalid gateway key")
        return Principal(
            caller=digest[:12],
            key_header=header,
            passthrough=passthrough,
            admin=digest in self._admin,
            provider_key=provider,
        )


def _scope_headers(scope: Scope) -> dict[str, str]:
    return {k.decode("latin-1"): v.decode("latin-1") for k, v in scope["headers"]}


def admit_scope(admission: Admission, scope: Scope) -> Principal:
    """The request's principal, computed on first use and kept in its scope; raises AuthError."""
    found = scope.get(SCOPE_KEY)
    if isinstance(found, Principal):
        return found
    principal = admission.principal(_scope_headers(scope))
    scope[SCOPE_KEY] = principal
    return principal


def admit(request: Request) -> Principal:
    """The request's principal (admitting it now if no earlier step did); raises AuthError (401)."""
    admission: Admission = request.app.state.admission
    return admit_scope(admission, request.scope)


def admitted(request: Request) -> Principal:
    """The principal admission already named for this request. A door calls this, never a header:
    reaching it unadmitted is a bug, so it fails loudly instead of guessing a caller."""
    found = request.scope.get(SCOPE_KEY)
    if not isinstance(found, Principal):
        raise RuntimeError("request reached a door without passing admission")
    return found


async def require_client(request: Request) -> Principal:
    """FastAPI dependency: a valid gateway key (when auth is on)."""
    return admit(request)
