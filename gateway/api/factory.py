"""Build the app from the environment, for ``uvicorn --factory`` with several workers.

``ventana serve`` puts the resolved config (path and any simulator override) in the
environment so every worker process builds the same gateway.
"""

from __future__ import annotations

import os

import orjson
from fastapi import FastAPI

from gateway.config import load_settings, parse_settings


def app_from_env() -> FastAPI:
    from gateway.api.app import create_app
    from gateway.serve import build_dependencies

    inline = os.environ.get("VENTANA_SETTINGS_JSON")
    settings = parse_settings(orjson.loads(inline)) if inline else load_settings()
    return create_app(settings, **build_dependencies(settings))
