"""A prompt that went out over the window is flagged, and a negative saving is shown as one.

The issue's "found" list had a turn forwarded over the window open with "12,387 tokens saved". Here one
stored request forwarded 1,300 prompt tokens where the client sent 1,000, to a 1,000-token window: the
request page, the session page, the list and ``ventana inspect`` must each say so, never "saved".
"""

from __future__ import annotations

import time
from pathlib import Path

from rich.console import Console
from starlette.datastructures import QueryParams

from gateway.store.engine import make_engine
from gateway.store.inspect_request import print_inspect
from gateway.store.migrate import upgrade
from gateway.store.queries import get_request
from gateway.store.writer import write_records
from gateway.tokens import counter_for
from gateway.ui.pages import _page, request_page, session_page
from gateway.ui.queries import list_session_rows, session_turns
from gateway.ui.session_view import SessionsForm
from tests.store.records import make_record


def test_over_window_and_negative_saving_on_every_page(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'flags.db'}"
    upgrade(url)
    engine = make_engine(url)
    record = make_record(
        [{"role": "user", "content": "a request the gateway made longer"}],
        session_id="s-longer",
        created_at=time.time(),
        tokens_original=1_000,
        tokens_assembled=1_300,
        budget={"context_window": 1_000, "prompt_tokens": 1_300, "components": {}},
    )
    with engine.begin() as conn:
        write_records(conn, [record])
    stored = get_request(engine, record.request_id)
    assert stored is not None

    page = _page("request.html", **request_page(stored, counter_for("o200k_base"), lambda _: None), names={}).body
    html = bytes(page).decode()
    assert 'id="over-window-banner"' in html
    assert "1,300 prompt tokens went out for a 1,000-token window" in html
    assert 'class="negative">prompt tokens, original → forwarded: 300 more than the client sent (+30%)' in html
    assert " saved (" not in html

    turns = session_turns(engine, "s-longer")
    session = bytes(_page("session.html", **session_page("s-longer", turns), names={}).body).decode()
    assert '<b id="total-saved" class="negative">−300</b>' in session
    listed = list_session_rows(engine)
    (row,) = listed.rows
    assert row.tokens_saved == -300
    values = {"page": listed, "form": SessionsForm.parse(QueryParams("")), "models": [], "callers": [], "hits": []}
    costs = {(row.caller, row.session_id): None}
    assert "300 more sent" in bytes(_page("sessions.html", **values, costs=costs, names={}).body).decode()
    engine.dispose()

    console = Console(record=True, width=200)
    print_inspect(stored, console)
    shown = console.export_text()
    assert "OVER THE WINDOW: 1,300 prompt tokens went out for a 1,000-token window" in shown
    assert "300 more than the client sent (+30%)" in shown
