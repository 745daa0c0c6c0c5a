"""Record the requests the gateway refuses before forwarding, so a client holding the id finds them.

A refusal (401 bad key, 404 unknown model, 400 bad input, 413 too large, 429 rate limited, a
context that cannot fit) is stored like any request: who (``caller``), at which door
(``route``), the status and the reason, with no body (redaction applies to the reason as to
every recorded text). ``ventana logs`` and ``/ui`` find it by its ``x-ventana-request-id``.
"""

from __future__ import annotations

import logging
import time

from starlette.requests import Request

from gateway.api.admission import ANONYMOUS, admit
from gateway.api.deps import Gateway
from gateway.errors import UpstreamError, VentanaError
from gateway.sessions.identify import client_session
from gateway.store.record import refusal_record

log = logging.getLogger("ventana")

#: Front-door paths -> the route stored; refusals elsewhere (``/v1/models``, admin routes) are not requests.
DOORS = {
    "/v1/chat/completions": "chat",
    "/chat/completions": "chat",
    "/v1/responses": "responses",
    "/responses": "responses",
    "/v1/messages": "messages",
}


def refusal_caller(request: Request) -> str:
    """The caller a refused request names: the admission ``Principal``'s. A request refused by admission
    itself (no key, a wrong key) has none, and is recorded as ``anonymous``: a key that was not admitted
    names nobody."""
    try:
        return admit(request).caller
    except VentanaError:
        return ANONYMOUS


def record_refusal(gw: Gateway, request: Request, exc: VentanaError, request_id: str) -> None:
    """Store the refusal ``exc`` of ``request`` under ``request_id``; a failure is logged, never raised."""
    route = DOORS.get(request.url.path)
    if route is None or isinstance(exc, UpstreamError) or exc.status_code >= 500:
        return
    try:
        record = refusal_record(
            request_id,
            caller=refusal_caller(request),
            route=route,
            status=exc.status_code,
            reason=f"{exc.code or exc.error_type}: {exc.message}",
            created_at=time.time(),
            session_id=client_session(request.headers) or "",  # named as the door names it
        )
        gw.recorder.journal(record)  # the refusal is the answer, sent once this returns (store/journal.py)
        gw.recorder.record(record)
    except Exception:  # bookkeeping: the client gets its refusal either way
        log.exception("recording the refusal %s failed", request_id)
