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
def provider_sim(host: str, port: int, record: str | None, latency_ms: float, no_cache: bool) -> None:
    """Run the local OpenAI-compatible fake provider (deterministic answers, OpenAI cache accounting)."""
    import uvicorn

    from gateway.providersim.app import create_sim_app

    app = create_sim_app(record=record, latency_ms=latency_ms, cache=not no_cache)
    click.echo(f"Ventana provider simulator on http://{host}:{port}/v1", err=True)
    uvicorn.run(app, host=host, port=port, log_level="warning", access_log=False)


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


if __name__ == "__main__":
    sys.exit(main())
