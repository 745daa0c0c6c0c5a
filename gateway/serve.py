"""Start a gateway: resolve the config, fall back to the simulator without keys, run uvicorn.

When a configured model needs a provider key that is not in the environment and has
no ``api_base`` of its own, ``ventana serve`` starts the bundled provider simulator
and routes that model to it, whatever its provider (``anthropic/`` models to the simulator's
Messages route, every other one over chat), and says so loudly: the banner names, per model,
whether a real provider or the simulator answers it, because a demo must never look like it is
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


def _key_unset(model: ModelConfig) -> bool:
    return bool(model.api_key_env) and not os.environ.get(model.api_key_env or "")


def models_without_keys(settings: Settings) -> list[ModelConfig]:
    """The models the simulator answers: those whose key is unset and that have no ``api_base``,
    and those configured ``simulated: true``."""
    return [m for m in settings.models if m.simulated or (m.api_base is None and _key_unset(m))]


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
    """Route ``models`` to the simulator at ``base_url`` (its ``/v1``), each in the format it speaks there.

    ``anthropic/`` models keep their provider and reach the simulator's Messages route through
    litellm, which appends ``/v1/messages`` to the root it is given; every other provider is sent
    chat (``ModelConfig.simulated`` makes it speak OpenAI), so the assembly passes still see the
    configured provider (cache breakpoints, tool modes) while no key and no native wire format is needed.
    """
    names = {m.name for m in models}
    root = base_url.removesuffix("/").removesuffix("/v1")

    def routed(m: ModelConfig) -> ModelConfig:
        if m.name not in names:
            return m
        # A model that would reach OpenAI's own Responses API keeps that door: the simulator serves it too.
        wire = "responses" if m.speaks_responses else m.wire_api
        api_base = root if m.provider == "anthropic" else base_url
        return m.model_copy(update={"api_base": api_base, "simulated": True, "wire_api": wire})

    return settings.model_copy(update={"models": tuple(routed(m) for m in settings.models)})


def build_dependencies(settings: Settings) -> dict[str, Any]:
    """The recorder, session store and tool profile store a served gateway uses.

    Checks the store first (a fresh SQLite file is migrated, an unmigrated database
    raises StoreNotMigrated), so a gateway never serves requests it cannot record.
    """
    from gateway.edges.tool_usage import learns
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
    """Say loudly which models the simulator answers (``replay send``; ``serve`` prints ``banner``)."""
    bar = "=" * 78
    print(f"\n{bar}\n" + "\n".join(_simulated_lines(models, base_url)) + f"\n{bar}\n", flush=True)


def _simulated_lines(models: list[ModelConfig], base_url: str) -> list[str]:
    names = ", ".join(m.name for m in models)
    envs = ", ".join(sorted({m.api_key_env or "" for m in models if _key_unset(m)}))
    lines = [f"  NO PROVIDER KEY SET ({envs})."] if envs else []
    lines.append(f"  Models {names} are answered by Ventana's LOCAL PROVIDER SIMULATOR at {base_url}.")
    if envs:
        lines.append(f"  Answers are simulated. Set {envs} to talk to the real provider.")
    else:
        lines.append("  Answers are simulated (simulated: true in the config).")
    return lines


def _destination(model: ModelConfig) -> str:
    if model.simulated:
        door = "Messages" if model.provider == "anthropic" else "chat"
        why = f"{model.api_key_env} not set" if _key_unset(model) else "simulated: true"
        return f"SIMULATED ({why}), on the simulator's {door} route"
    where = model.api_base or f"{model.provider}'s API"
    return f"real: {where}" + (f", key from {model.api_key_env}" if model.api_key_env else "")


def banner(settings: Settings, url: str, simulated: list[ModelConfig], sim_url: str | None) -> str:
    """What ``ventana serve`` prints at start: where each kind of client points, where the
    inspector and the metrics are, and which model goes to a real provider and which is simulated."""
    bar = "=" * 78
    width = max(len(f"{m.name} ({m.provider})") for m in settings.models) if settings.models else 0
    lines = [
        bar,
        f"  Ventana gateway on {url}",
        f"    OpenAI SDK, Agents SDK, Codex CLI:  base_url {url}/v1",
        f"    Anthropic SDK, Claude Code:         ANTHROPIC_BASE_URL={url}",
        f"    context inspector:                  {url}/ui",
        f"    Prometheus metrics:                 {url}/metrics",
        "  Models:",
        *(f"    {f'{m.name} ({m.provider})':<{width}}  {_destination(m)}" for m in settings.models),
    ]
    if simulated and sim_url:
        lines += _simulated_lines(simulated, sim_url)
    return "\n".join(["", *lines, bar, ""])


def _shown_host(host: str) -> str:
    """A host a browser on this machine can open: a wildcard bind is reachable on loopback."""
    return "127.0.0.1" if host in ("0.0.0.0", "::", "") else (f"[{host}]" if ":" in host else host)


def run(settings: Settings, *, host: str, port: int, workers: int = 1, log_level: str = "info") -> None:
    from gateway.store.migrate import check_store

    if check_store(settings.database_url) == "migrated":  # once, here, before any worker starts
        print(f"Created the context store at {settings.database_url}", flush=True)
    missing = models_without_keys(settings)
    sim_url = None
    if missing:
        sim_url = start_simulator_thread() if workers == 1 else _simulator_for_workers()
        settings = with_simulator(settings, sim_url, missing)
    print(banner(settings, f"http://{_shown_host(host)}:{port}", missing, sim_url), flush=True)
    if workers > 1 and settings.session_state == "memory":
        # Workers are separate processes: a conversation's turns may land on any of them.
        print("--workers > 1: session state is shared through the database", flush=True)
        settings = settings.model_copy(update={"session_state": "database"})
    if workers > 1:
        # Only what was set: a worker must tell an operator's value from a default, as one process does
        # (``compaction_policy.for_window`` sizes the summary only when the config left it unset).
        inline = settings.model_dump(mode="json", exclude_unset=True)
        os.environ["VENTANA_SETTINGS_JSON"] = orjson.dumps(inline).decode()
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
    uvicorn.run(app, host=host, port=port, log_level=log_level, access_log=False, loop=_loop(settings))


def _loop(settings: Settings) -> Literal["auto", "asyncio"]:
    """uvloop when installed, unless callbacks are timed: uvloop's loop runs them from C, unhooked."""
    return "asyncio" if settings.diagnostics.time_callbacks else "auto"


def _simulator_for_workers() -> str:
    # Workers are separate processes: the simulator runs once, in this parent process.
    return start_simulator_thread()
