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
from gateway.replay.served_summaries import served_summarizer
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


def _session_model(settings: Settings, session: str) -> str | None:
    """The model the logged session used (its newest request's), or None when nothing is logged."""
    from gateway.store.commands import reading
    from gateway.store.queries import list_requests

    with reading(settings) as engine:
        rows = list_requests(engine, session=session, limit=1)
    return rows[0].model if rows else None


def whatif_defaults(
    settings: Settings, session: str | None, model_name: str | None, policies: tuple[str, ...]
) -> tuple[str | None, tuple[str, ...], str]:
    """Fill in what the user did not name, and say what was chosen.

    A logged session is replayed by default as it was served: with its own model and the
    config's policy (not the first configured model and the bundled policy). A transcript has
    no model of its own: the first configured one, and the bundled policy, as before.
    """
    notes = []
    if model_name is None and session is not None:
        model_name = _session_model(settings, session)
        if model_name is not None:
            if settings.model(model_name) is None:
                raise ConfigError(
                    f"session {session!r} used model {model_name!r}, which this config does not define; pass --model"
                )
            notes.append(f"model {model_name} (the session's)")
    if not policies:
        policies = ("served",) if session is not None else ("default",)
        notes.append(
            "policy served (this config's policy)" if session is not None else "policy default (the bundled one)"
        )
    return model_name, policies, ", ".join(notes)


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
    model_name, policies, chosen = whatif_defaults(settings, session, model_name, policies)
    model = pick_model(settings, model_name)
    if chosen:
        Console(stderr=True).print(f"what-if with {chosen}", style="dim")
    conversations = _conversations(settings, model.name, transcript, session, since, limit)
    total_turns = sum(len(c.requests) for c in conversations)
    # The served policy summarises as the gateway did: with the texts it sent (a model's summary cannot be
    # written again offline); other policies summarise other ranges, extractively.
    served = served_summarizer((o, a) for c in conversations for o, a in zip(c.requests, c.served, strict=False))
    results = []
    for spec in policies:
        name, policy = load_policy(spec, served=settings.policy)
        with tqdm(
            total=total_turns, desc=f"what-if {name}", unit="turn", file=sys.stderr, disable=total_turns < 20
        ) as bar:

            def progress(n: int) -> None:
                bar.update(n)

            results.append(
                run_whatif(
                    conversations,
                    policy,
                    model=model.name,
                    litellm_model=model.litellm_model,
                    context_window=model.context_window,
                    cache_kind=cache_model or model.cache_model,
                    policy_name=name,
                    progress=progress,
                    summarizer=served if name == "served" else None,
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
