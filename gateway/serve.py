"""Start a gateway: resolve the config, fall back to the simulator without keys, run uvicorn.

When a configured model needs a provider key that is not in the environment and has
no ``api_base`` of its own, ``ventana serve`` starts the bundled provider simulator
and routes that model to it, and says so loudly: a demo must never look like it is
talking to a real provider when it is not.
"""

from __future__ import annotations

import logging
import os
import socket
import tempfile
import threading
import time
from typing import Any, Literal

import orjson
import uvicorn

from gateway.config import ModelConfig, Settings

log = logging.getLogger("ventana")


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def models_without_keys(settings: Settings) -> list[ModelConfig]:
    return [m for m in settings.models if m.api_base is None and m.api_key_env and not os.environ.get(m.api_key_env)]


def start_simulator_thread(host: str = "127.0.0.1", port: int | None = None) -> str:
    """Run the provider simulator in a daemon thread; return its base URL once it answers."""
    from gateway.providersim.app import create_sim_app

    port = port or free_port(host)
    server = uvicorn.Server(uvicorn.Config(create_sim_app(), host=host, port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, name="provider-sim", daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started and time.monotonic() < deadline:
        time.sleep(0.02)
    return f"http://{host}:{port}/v1"


def with_simulator(settings: Settings, base_url: str, models: list[ModelConfig]) -> Settings:
    names = {m.name for m in models}
    # A model that would reach OpenAI's own Responses API keeps that door: the simulator serves it too.
    routed = tuple(
        m.model_copy(update={"api_base": base_url, "wire_api": "responses" if m.speaks_responses else m.wire_api})
        if m.name in names
        else m
        for m in settings.models
    )
    return settings.model_copy(update={"models": routed})


def build_dependencies(settings: Settings) -> dict[str, Any]:
    """The recorder, session store and tool profile store a served gateway uses.

    Checks the store first (a fresh SQLite file is migrated, an unmigrated database
    raises StoreNotMigrated), so a gateway never serves requests it cannot record.
    """
    from gateway.api.tool_usage_runtime import learns
    from gateway.store.migrate import check_store
    from gateway.store.sql_recorder import SqlRecorder

    check_store(settings.database_url)
    deps: dict[str, Any] = {"recorder": SqlRecorder.from_settings(settings)}
    if settings.session_state == "database":
        from gateway.sessions.shared import SharedSessionStore

        deps["sessions"] = SharedSessionStore(settings.database_url, redis_url=settings.redis_url)
    if settings.policy.tools.usage_persist and learns(settings):
        from gateway.assembly.tool_scoring.minilm import ENCODER_ID
        from gateway.store.tool_profiles import ToolProfileStore

        deps["tool_profiles"] = ToolProfileStore(settings.database_url, ENCODER_ID)
    return deps


def announce_simulator(models: list[ModelConfig], base_url: str) -> None:
    bar = "=" * 78
    names = ", ".join(m.name for m in models)
    envs = ", ".join(sorted({m.api_key_env or "" for m in models}))
    print(
        f"\n{bar}\n  NO PROVIDER KEY SET ({envs}).\n"
        f"  Models {names} are answered by Ventana's LOCAL PROVIDER SIMULATOR at {base_url}.\n"
        f"  Answers are simulated. Set {envs} to talk to the real provider.\n{bar}\n",
        flush=True,
    )


def run(settings: Settings, *, host: str, port: int, workers: int = 1, log_level: str = "info") -> None:
    from gateway.store.migrate import check_store

    if check_store(settings.database_url) == "migrated":  # once, here, before any worker starts
        print(f"Created the context store at {settings.database_url}", flush=True)
    missing = models_without_keys(settings)
    if missing:
        base_url = start_simulator_thread() if workers == 1 else _simulator_for_workers()
        announce_simulator(missing, base_url)
        settings = with_simulator(settings, base_url, missing)
    if workers > 1 and settings.session_state == "memory":
        # Workers are separate processes: a conversation's turns may land on any of them.
        print("--workers > 1: session state is shared through the database", flush=True)
        settings = settings.model_copy(update={"session_state": "database"})
    if workers > 1:
        os.environ["VENTANA_SETTINGS_JSON"] = orjson.dumps(settings.model_dump(mode="json")).decode()
        os.environ.setdefault("PROMETHEUS_MULTIPROC_DIR", tempfile.mkdtemp(prefix="ventana-metrics-"))
        uvicorn.run(
            "gateway.api.factory:app_from_env",
            factory=True,
            host=host,
            port=port,
            workers=workers,
            log_level=log_level,
            access_log=False,
            loop=_loop(settings),
        )
        return
    from gateway.api.app import create_app

    app = create_app(settings, **build_dependencies(settings))
    print(f"Ventana gateway listening on http://{host}:{port}/v1", flush=True)
    uvicorn.run(app, host=host, port=port, log_level=log_level, access_log=False, loop=_loop(settings))


def _loop(settings: Settings) -> Literal["auto", "asyncio"]:
    """uvloop when installed, unless callbacks are timed: uvloop's loop runs them from C, unhooked."""
    return "asyncio" if settings.diagnostics.time_callbacks else "auto"


def _simulator_for_workers() -> str:
    # Workers are separate processes: the simulator runs once, in this parent process.
    return start_simulator_thread()
