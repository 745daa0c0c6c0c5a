"""Refuse what a web page in someone's browser can make the gateway do (CSRF, DNS rebinding).

With auth off, the gateway's only credential is where a request comes from: a page on
``https://evil.example`` that makes the operator's browser POST to ``127.0.0.1:8080`` would
be answered with the gateway's provider key. A browser sends such a cross-site POST without
asking first only when its content type is a "simple" one (``text/plain``, a form), so:

- a POST, PUT, PATCH or DELETE that declares a body type must declare JSON (415 otherwise);
  one with no type at all (``curl --data-binary``, a bodiless ``DELETE``) is let through, since
  a page can only send that with an ``Origin``, which the next rule checks. A JSON POST from
  another origin needs a CORS preflight, which the gateway never grants. ``/login`` takes
  its form, and is covered by the next rule.
- a request whose ``Origin`` (or ``Sec-Fetch-Site: cross-site``) says another site sent it is
  refused (403) unless the origin is in ``auth.allowed_origins``. SDK clients send neither.

It is a pure ASGI middleware: it reads headers only, so the body still streams to the route.
"""

from __future__ import annotations

from collections.abc import Iterable

import orjson
from starlette.types import ASGIApp, Receive, Scope, Send

from gateway.errors import PermissionDenied, UnsupportedMediaType, VentanaError

#: Routes whose POST body is a browser form, not JSON (the origin check still applies).
FORM_ROUTES = frozenset({"/login", "/logout"})
_WRITES = frozenset({"POST", "PUT", "PATCH", "DELETE"})
#: The headers ``refusal`` reads: only these are decoded (an SDK sends a dozen more on every request).
_READ = frozenset({b"origin", b"host", b"sec-fetch-site", b"content-type"})


def is_json(content_type: str) -> bool:
    """``application/json`` or any ``+json`` type, parameters (charset) ignored."""
    if content_type == "application/json":  # what every SDK sends
        return True
    kind = content_type.split(";", 1)[0].strip().lower()
    return kind == "application/json" or (kind.startswith("application/") and kind.endswith("+json"))


def refusal(method: str, path: str, headers: dict[str, str], allowed_origins: frozenset[str]) -> VentanaError | None:
    """Why a browser-made request must not be served, or None to serve it."""
    origin = headers.get("origin")
    if origin is not None and origin != "null" and origin.rstrip("/") in allowed_origins:
        return None
    same_host = origin is not None and origin.split("://", 1)[-1].rstrip("/") == headers.get("host", "")
    cross = (origin is not None and not same_host) or headers.get("sec-fetch-site") == "cross-site"
    if cross:
        return PermissionDenied(
            f"cross-origin request from {origin or 'another site'} refused: add the origin to auth.allowed_origins",
            code="cross_origin_refused",
        )
    declared = headers.get("content-type")
    # No type at all is not what a page can send without an Origin (a Blob body), so it is let through.
    if method in _WRITES and declared is not None and path not in FORM_ROUTES and not is_json(declared):
        return UnsupportedMediaType(
            f"the body must be JSON: send 'Content-Type: application/json', not {headers.get('content-type')!r}",
            param="content-type",
        )
    return None


class BrowserGuard:
    def __init__(self, app: ASGIApp, *, allowed_origins: Iterable[str] = ()) -> None:
        self.app = app
        self.allowed_origins = frozenset(o.rstrip("/") for o in allowed_origins)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = {k.decode("latin-1"): v.decode("latin-1") for k, v in scope["headers"] if k in _READ}
        refused = refusal(scope["method"], scope["path"], headers, self.allowed_origins)
        if refused is None:
            await self.app(scope, receive, send)
            return
        body = orjson.dumps(refused.body())
        await send(
            {
                "type": "http.response.start",
                "status": refused.status_code,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())],
            }
        )
        await send({"type": "http.response.body", "body": body})
