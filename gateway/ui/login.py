"""The inspector's login: ``POST /login`` trades an admin key for a random session token.

The cookie used to be the admin key itself (no ``Secure``, no expiry, no logout), and
``/login`` stored any value and read an unbounded body. Now the key is checked, the cookie
holds a random token (``secrets.token_urlsafe``) that expires after ``SESSION_TTL_S``, is
``Secure`` when the page came over https (directly or through a proxy saying so), and
``POST /logout`` revokes it. Tokens live in the session store's claims (``login:<sha256>``),
so every worker and replica sharing the store honours them, and only their digest is kept.
"""

from __future__ import annotations

import hashlib
import secrets
import time
from urllib.parse import parse_qs

from fastapi import APIRouter
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response

from gateway.api.admission import Principal
from gateway.api.auth import Access, hash_key, socket_host
from gateway.api.deps import Gateway
from gateway.errors import BodyTooLarge
from gateway.sessions.protocol import store_call

COOKIE = "ventana_admin"
SESSION_TTL_S = 12 * 3600
#: The login form holds one key: anything longer is not a login.
MAX_LOGIN_BODY = 4096


def _digest(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8", "surrogatepass")).hexdigest()


async def _token_valid(gw: Gateway, token: str) -> bool:
    digest = _digest(token)
    expires = await store_call(gw.sessions, gw.sessions.result, f"login:{digest}")
    if expires is None or float(expires) < time.time():
        return False
    return await store_call(gw.sessions, gw.sessions.result, f"logout:{digest}") is None


async def require_ui_admin(request: Request) -> Principal:
    """The admin guard, also accepting the session token of the inspector's login cookie."""
    access: Access = request.app.state.access
    token = request.cookies.get(COOKIE)
    if token and "authorization" not in request.headers and await _token_valid(request.app.state.gateway, token):
        return Principal(caller="login", admin=True)
    return access.admin(request.headers, socket_host(request))


async def _read_bounded(request: Request) -> bytes:
    body = b""
    async for chunk in request.stream():
        body += chunk
        if len(body) > MAX_LOGIN_BODY:
            raise BodyTooLarge(f"a login form is at most {MAX_LOGIN_BODY} bytes", code="request_too_large")
    return body


def _https(request: Request) -> bool:
    return request.url.scheme == "https" or request.headers.get("x-forwarded-proto", "").lower() == "https"


async def _claim(gw: Gateway, key: str, value: str) -> None:
    if await store_call(gw.sessions, gw.sessions.claim, key):
        await store_call(gw.sessions, gw.sessions.finish, key, value)


def login_router() -> APIRouter:
    router = APIRouter()

    @router.get("/login")
    async def _form() -> HTMLResponse:
        from gateway.ui.pages import _page

        return _page("login.html")

    @router.post("/login")
    async def _login(request: Request) -> Response:
        form = parse_qs((await _read_bounded(request)).decode("utf-8", "replace"))
        key = form.get("key", [""])[0].strip()
        access: Access = request.app.state.access
        if not key or hash_key(key) not in access.admin_digests:
            return RedirectResponse("/login", status_code=303)
        token = secrets.token_urlsafe(32)
        await _claim(request.app.state.gateway, f"login:{_digest(token)}", str(time.time() + SESSION_TTL_S))
        response = RedirectResponse("/ui", status_code=303)
        response.set_cookie(
            COOKIE, token, max_age=SESSION_TTL_S, httponly=True, samesite="strict", secure=_https(request)
        )
        return response

    @router.post("/logout")
    async def _logout(request: Request) -> Response:
        token = request.cookies.get(COOKIE)
        if token:
            await _claim(request.app.state.gateway, f"logout:{_digest(token)}", "1")
        response = RedirectResponse("/login", status_code=303)
        response.delete_cookie(COOKIE, httponly=True, samesite="strict", secure=_https(request))
        return response

    return router
