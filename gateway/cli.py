"""The ``ventana`` command: one group, each command's docstring is its help text.

This module parses arguments and calls into the packages; the work lives there.
"""

from __future__ import annotations

import sys

import click

import gateway
from gateway.errors import ConfigError


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
    run(settings, host=host, port=port, workers=workers, log_level=log_level)


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
    "--cut-port",
    type=int,
    default=None,
    help="Also listen here through a front that can drop connections ('close' faults).",
)
def provider_sim(
    host: str, port: int, record: str | None, latency_ms: float, no_cache: bool, cut_port: int | None
) -> None:
    """Run the local OpenAI-compatible fake provider (deterministic answers, OpenAI cache accounting)."""
    import uvicorn

    from gateway.providersim.app import create_sim_app

    app = create_sim_app(record=record, latency_ms=latency_ms, cache=not no_cache, port=port, cut_port=cut_port)
    click.echo(f"Ventana provider simulator on http://{host}:{port}/v1", err=True)
    uvicorn.run(app, host=host, port=port, log_level="warning", access_log=False)


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


if __name__ == "__main__":
    sys.exit(main())
