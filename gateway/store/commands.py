"""What ``ventana migrate``, ``logs``, ``inspect`` and ``store prune`` do; ``cli.py`` only parses.

Each function takes the resolved settings and a rich Console and raises StoreError
(turned into a one-line CLI error) when the store cannot be read.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager

import orjson
from rich.console import Console
from sqlalchemy import Engine

from gateway.config import Settings
from gateway.errors import StoreError, StoreNotMigrated
from gateway.store.engine import make_engine, normalise_url, safe_url, sqlite_path
from gateway.store.inspect_request import diff_lines, not_found_message, print_inspect
from gateway.store.logs_table import parse_since, print_logs
from gateway.store.migrate import current_revision, head_revision, upgrade
from gateway.store.queries import get_request, list_requests
from gateway.store.retention import prune
from gateway.store.session_retention import forget_sessions


def run_migrate(settings: Settings, console: Console, *, revision: str = "head") -> None:
    url = settings.database_url
    engine = make_engine(url)
    path = sqlite_path(normalise_url(url))
    try:
        before = None if path is not None and not path.exists() else current_revision(engine)
    finally:
        engine.dispose()
    after = upgrade(url, revision)
    if before == after:
        console.print(f"store {safe_url(url)} is already at revision {after}")
    else:
        console.print(f"store {safe_url(url)} migrated from {before or 'an empty database'} to revision {after}")


@contextmanager
def reading(settings: Settings) -> Iterator[Engine]:
    """An engine on a store that exists and is at the head revision (never creates one)."""
    url = settings.database_url
    path = sqlite_path(normalise_url(url))
    if path is not None and not path.exists():
        raise StoreError(f"no store at {safe_url(url)}: nothing recorded yet (or run from the gateway's directory)")
    engine = make_engine(url)
    try:
        revision = current_revision(engine)
        if revision != head_revision():
            raise StoreNotMigrated(
                f"the store database {safe_url(url)} is at revision {revision or 'none'}, not {head_revision()}: "
                "run `ventana migrate` first"
            )
        yield engine
    finally:
        engine.dispose()


def run_logs(
    settings: Settings,
    console: Console,
    *,
    session: str | None,
    since: str | None,
    limit: int,
    as_json: bool,
    caller: str | None = None,
    request: str | None = None,
    until: str | None = None,
) -> None:
    try:
        since_ts = None if since is None else parse_since(since)
        until_ts = None if until is None else parse_since(until)
    except ValueError as exc:
        raise StoreError(str(exc)) from exc
    names = settings.auth.caller_names
    if caller is not None:  # a key's configured name finds its caller id
        caller = next((c for c, name in names.items() if name == caller), caller)
    with reading(settings) as engine:
        rows = list_requests(
            engine, session=session, since=since_ts, until=until_ts, limit=limit, caller=caller, request=request
        )
    if as_json:
        console.out(orjson.dumps([r.to_dict() for r in rows], option=orjson.OPT_INDENT_2).decode(), highlight=False)
        return
    print_logs(rows, console, names)


def run_inspect(settings: Settings, console: Console, request_id: str, *, diff: bool, as_json: bool) -> None:
    with reading(settings) as engine:
        stored = get_request(engine, request_id)
        if stored is None:
            raise StoreError(not_found_message(engine, request_id, safe_url(settings.database_url)))
    if as_json:
        data = stored.to_dict()
        if diff:
            data = {"request_id": stored.summary.request_id, "diff": diff_lines(stored)}
        console.out(orjson.dumps(data, option=orjson.OPT_INDENT_2).decode(), highlight=False)
        return
    print_inspect(stored, console, diff=diff)


def run_prune(settings: Settings, console: Console, *, days: int | None) -> None:
    retention = days or settings.store.retention_days
    if retention is None:
        raise StoreError("no retention set: pass --days N or set store.retention_days in the config")
    with reading(settings) as engine:
        pruned = prune(engine, retention_days=retention)
        sessions = forget_sessions(engine, time.time() - retention * 86400)
    console.print(
        f"pruned requests older than {retention} days: {pruned.requests} requests, "
        f"{pruned.nodes} message nodes, {pruned.blobs} blobs, {sessions} idle session states, "
        f"{pruned.passages} archived recall passages, {pruned.profiles} tool usage profiles not updated since"
    )
