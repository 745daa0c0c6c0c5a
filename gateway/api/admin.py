"""Administrative HTTP surface: everything here sits behind ``require_admin``.

``admin_router`` is the one place admin routes hang from; the router itself carries the
admin dependency, so a route added to it cannot forget the check. Other admin surfaces
(the inspection UI) either mount on this router or declare
``dependencies=[Depends(require_admin)]``; ``tests/api/test_admin_guard.py`` walks every
route of the app and fails when an ``/admin`` or ``/ui`` route answers without an admin key.

``GET /admin/status`` reports how the gateway is set up (never a key or a digest).
"""

from __future__ import annotations

import time

import orjson
from fastapi import APIRouter, Depends
from starlette.responses import Response

from gateway.api.auth import require_admin
from gateway.api.deps import Gateway

ADMIN_PREFIXES = ("/admin", "/ui")


def admin_router(gw: Gateway) -> APIRouter:
    router = APIRouter(prefix="/admin", dependencies=[Depends(require_admin)])

    @router.get("/status")
    async def _status() -> Response:
        settings = gw.settings
        body = {
            "uptime_s": round(time.time() - gw.started_at, 3),
            "models": [m.name for m in settings.models],
            "store_ready": gw.recorder.ready(),
            "auth": {
                "enabled": settings.auth.enabled,
                "passthrough": settings.auth.passthrough,
                "keys": len(settings.auth.keys),
                "admin_keys": len(settings.auth.admin_keys),
                "protect_metrics": settings.auth.protect_metrics,
            },
            "limits": settings.limits.model_dump(),
            "upstream": settings.upstream.model_dump(),
        }
        return Response(orjson.dumps(body), media_type="application/json")

    return router
