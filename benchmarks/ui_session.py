"""How long the inspector's session page takes for a 500-turn session, against listing it raw.

    python -m benchmarks.ui_session [--turns 500] [--repeats 7]

Writes a ``--turns``-turn session (real ToolBench messages, a budget report and decisions on
every record) into a fresh SQLite store with the real writer, then times, median of
``--repeats``: the page's query plus its template (what ``/ui/sessions/{id}`` does, called
in process), against the baseline of the plain ``store.queries.list_requests`` query for
the same rows.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

import gateway  # noqa: F401
from gateway.store.engine import make_engine
from gateway.store.migrate import upgrade
from gateway.store.queries import list_requests
from gateway.store.record import RequestRecord
from gateway.store.writer import KnownContent, write_records
from gateway.ui.pages import _page, session_page
from gateway.ui.queries import session_turns
from gateway.upstream.usage import Usage

SESSION = "ui-bench"


def _fill(url: str, turns: int) -> None:
    engine = make_engine(url)
    known = KnownContent()
    messages: list[dict] = [{"role": "system", "content": "You are a helpful agent."}]
    budget = {
        "components": {
            c: {"tokens": 100 * (i + 1)}
            for i, c in enumerate(("system", "tools", "history", "summary", "documents", "query", "reminder"))
        }
    }
    decisions = [
        {
            "pass": "move_volatile",
            "action": "moved",
            "tokens_before": 10,
            "tokens_after": 5,
            "reason": "r",
            "detail": {},
        }
    ] * 6
    with engine.begin() as conn:
        for turn in range(1, turns + 1):
            messages = [*messages, {"role": "user", "content": f"question {turn} " * 20}]
            record = RequestRecord.of(
                request_id=f"req-{turn:06d}",
                session_id=SESSION,
                created_at=time.time() + turn,
                model="m",
                provider="openai",
                caller="c",
                original={"messages": messages},
                assembled={"messages": messages},
                decisions=decisions,
                turn=turn,
                budget=budget,
                usage=Usage(1000 + turn, 10, 512, 0),
            )
            write_records(conn, [record], known=known)
            messages = [*messages, {"role": "assistant", "content": f"answer {turn}"}]
    engine.dispose()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=500)
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args()
    url = f"sqlite:///{Path(tempfile.mkdtemp()) / 'ui.db'}"
    upgrade(url)
    _fill(url, args.turns)
    engine = make_engine(url)
    page, base = [], []
    for _ in range(args.repeats):
        t = time.perf_counter()
        rows = list_requests(engine, session=SESSION, limit=args.turns)
        base.append(time.perf_counter() - t)
        t = time.perf_counter()
        turns = session_turns(engine, SESSION)
        html = _page("session.html", **session_page(SESSION, turns)).body
        page.append(time.perf_counter() - t)
    assert len(rows) == len(turns) == args.turns
    p, b = statistics.median(page) * 1000, statistics.median(base) * 1000
    print(
        f"{args.turns} turns: session page {p:.1f} ms (query + template, {len(html) / 1024:.0f} KiB), "
        f"plain list query {b:.1f} ms, ratio {p / b:.2f}x"
    )


if __name__ == "__main__":
    main()
