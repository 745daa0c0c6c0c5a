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


if __name__ == "__main__":
    sys.exit(main())
