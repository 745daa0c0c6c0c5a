"""The body of ``ventana replay whatif``: read traffic, run each policy, print and write the report."""

from __future__ import annotations

import sys
from pathlib import Path

from rich.console import Console
from tqdm import tqdm

from gateway.config import Settings, load_settings
from gateway.errors import ConfigError
from gateway.replay.cli_support import load_policy, pick_model
from gateway.replay.report import print_report, to_csv, to_json, write_chart
from gateway.replay.transcripts import Conversation, conversations_from_store, read_transcripts
from gateway.replay.whatif import WhatIfResult, run_whatif


def _conversations(
    settings: Settings, model: str, transcript: str | None, session: str | None, since: str | None, limit: int | None
) -> list[Conversation]:
    if sum(x is not None for x in (transcript, session, since)) != 1:
        raise ConfigError("give exactly one of --transcript FILE, --session S or --since T")
    if transcript is not None:
        return list(read_transcripts(transcript, model, limit=limit))
    from gateway.store.commands import reading
    from gateway.store.logs_table import parse_since

    with reading(settings) as engine:
        found = conversations_from_store(engine, session=session, since=parse_since(since) if since else None)
    if not found:
        raise ConfigError(f"no logged requests for {'session ' + session if session else 'since ' + str(since)}")
    return found[:limit] if limit is not None else found


def whatif_command(
    *,
    transcript: str | None,
    session: str | None = None,
    since: str | None = None,
    policies: tuple[str, ...],
    config_path: str | None,
    model_name: str | None,
    cache_model: str | None,
    limit: int | None,
    fmt: str,
    out: str | None,
    chart: str | None,
) -> list[WhatIfResult]:
    settings = load_settings(config_path)
    model = pick_model(settings, model_name)
    conversations = _conversations(settings, model.name, transcript, session, since, limit)
    total_turns = sum(len(c.requests) for c in conversations)
    results = []
    for spec in policies:
        name, policy = load_policy(spec)
        with tqdm(
            total=total_turns, desc=f"what-if {name}", unit="turn", file=sys.stderr, disable=total_turns < 20
        ) as bar:
            results.append(
                run_whatif(
                    conversations,
                    policy,
                    model=model.name,
                    litellm_model=model.litellm_model,
                    context_window=model.context_window,
                    cache_kind=cache_model or model.cache_model,
                    policy_name=name,
                    progress=lambda n: None if bar.update(n) else None,  # tqdm.update returns a bool
                )
            )
    console = Console(width=None if sys.stdout.isatty() else 160)
    if fmt == "table":
        print_report(results, console, per_turn=total_turns <= 200)
    else:
        payload = to_csv(results).encode() if fmt == "csv" else to_json(results)
        if out:
            Path(out).write_bytes(payload)
        else:
            sys.stdout.buffer.write(payload)
    if chart:
        console.print(f"chart written to {write_chart(results, chart)}", style="dim")
    return results
