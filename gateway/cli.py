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
    "--cache-model",
    "cache_models",
    multiple=True,
    metavar="MODEL=KIND",
    help="Cache accounting per model: openai, anthropic or vllm ('*' for all). Default: by model name.",
)
def provider_sim(
    host: str, port: int, record: str | None, latency_ms: float, no_cache: bool, cache_models: tuple[str, ...]
) -> None:
    """Run the local OpenAI-compatible fake provider (deterministic answers, provider cache accounting)."""
    import uvicorn

    from gateway.providersim.app import create_sim_app

    kinds = dict(item.split("=", 1) for item in cache_models if "=" in item)
    app = create_sim_app(record=record, latency_ms=latency_ms, cache=not no_cache, cache_models=kinds)
    click.echo(f"Ventana provider simulator on http://{host}:{port}/v1", err=True)
    uvicorn.run(app, host=host, port=port, log_level="warning", access_log=False)


@main.group()
def replay() -> None:
    """Re-send logged contexts, or replay traffic under another policy."""


@replay.command("whatif")
@click.option(
    "--transcript",
    type=click.Path(exists=True, dir_okay=False),
    required=True,
    help="JSONL: one conversation per line ({messages, tools}), replayed turn by turn.",
)
@click.option(
    "--policy",
    "policies",
    multiple=True,
    default=("default",),
    show_default=True,
    help="'default', 'off', or a YAML file (a config or a policy mapping). Repeat to compare.",
)
@click.option("--config", "config_path", type=click.Path(dir_okay=False), default=None)
@click.option("--model", "model_name", default=None, help="Configured model to account for (default: the first).")
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
    transcript: str,
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
            policies=policies,
            config_path=config_path,
            model_name=model_name,
            cache_model=cache_model,
            limit=limit,
            fmt=fmt,
            out=out,
            chart=chart,
        )
    except ConfigError as exc:
        raise click.ClickException(str(exc)) from exc


if __name__ == "__main__":
    sys.exit(main())
