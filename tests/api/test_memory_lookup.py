"""Memory's lookup steps aside when there is nothing to rank, and ranks a question once.

A real database (SQLite, and PostgreSQL where available) with passages archived the way the
edge archives them; every statement the runtime sends is counted at the engine.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from typing import Any

import pytest
from sqlalchemy import event

from gateway.assembly.context import Checkpoint, Context
from gateway.assembly.memory_blocks import CANDIDATES_KEY
from gateway.config import parse_settings
from gateway.edges.memory import MemoryRuntime
from gateway.memory.archive import archive, passages_of
from gateway.tokens import counter_for
from tests.assembly.make_context import make_context
from tests.store.conftest import blank_url, db_url

__all__ = ["blank_url", "db_url"]

HISTORY: list[dict[str, Any]] = [
    {"role": "system", "content": "You book travel."},
    {"role": "user", "content": "My dog Rex comes along, he is a beagle."},
    {"role": "assistant", "content": "Noted, a pet fee applies."},
    {"role": "user", "content": "Book the flight to Lisbon on the 14th."},
    {"role": "assistant", "content": "Booked IB3170."},
]
CALLER = "abc123"


@pytest.fixture
def runtime(db_url: str) -> Iterator[tuple[MemoryRuntime, list[str]]]:
    """A runtime on a migrated database, and the statements it sends (appended as they run)."""
    memory = MemoryRuntime(parse_settings({"database_url": db_url}), stored=True)
    sent: list[str] = []
    event.listen(memory.engine, "before_cursor_execute", lambda *args: sent.append(str(args[2])))
    yield memory, sent
    memory.close()


def _asking(question: str, *, compacted: bool) -> Context:
    ctx = make_context({"messages": [*HISTORY, {"role": "user", "content": question}]})
    if not compacted:
        return ctx
    checkpoint = Checkpoint(range_hash="h1", start=1, end=3, summary="<summary>a dog</summary>")
    return ctx.replace(session=replace(ctx.session, checkpoints=(checkpoint,)))


def _archive_rex(memory: MemoryRuntime) -> None:
    rows = passages_of(HISTORY, 1, 3, 300, counter_for("o200k_base").text)
    archive(memory.engine, "test-session", "caller:" + CALLER, rows)


def test_a_session_that_never_compacted_is_answered_without_leaving_the_loop(
    runtime: tuple[MemoryRuntime, list[str]],
) -> None:
    memory, sent = runtime
    _archive_rex(memory)
    sent.clear()
    ctx = _asking("What breed is my dog?", compacted=False)
    lookup = memory.annotate(ctx, {}, CALLER)
    with pytest.raises(StopIteration) as done:  # finished at its first step: no thread hop, no await
        lookup.send(None)
    assert done.value.value is ctx
    assert sent == [], "no archived range in this session: nothing to rank, no query"


async def test_a_question_asked_again_reuses_its_ranking(runtime: tuple[MemoryRuntime, list[str]]) -> None:
    memory, sent = runtime
    _archive_rex(memory)
    sent.clear()
    first = await memory.annotate(_asking("What breed is my dog?", compacted=True), {}, CALLER)
    found = first.annotations[CANDIDATES_KEY]
    assert any("beagle" in p.text for p in found) and len(sent) == 1
    again = await memory.annotate(_asking("What breed is my dog?", compacted=True), {}, CALLER)
    assert again.annotations[CANDIDATES_KEY] == found and len(sent) == 1, "same question, same archive: no query"
    other = await memory.annotate(_asking("Which flight did I book?", compacted=True), {}, CALLER)
    assert len(sent) == 2, "a new question is ranked again"
    assert other.annotations[CANDIDATES_KEY] != found or not other.annotations[CANDIDATES_KEY]


async def test_a_new_checkpoint_ranks_the_same_question_again(runtime: tuple[MemoryRuntime, list[str]]) -> None:
    memory, sent = runtime
    _archive_rex(memory)
    sent.clear()
    ctx = _asking("What breed is my dog?", compacted=True)
    await memory.annotate(ctx, {}, CALLER)
    later = Checkpoint(range_hash="h2", start=1, end=5, summary="<summary>a dog, a flight</summary>")
    grown = ctx.replace(session=replace(ctx.session, checkpoints=(*ctx.session.checkpoints, later)))
    await memory.annotate(grown, {}, CALLER)
    assert len(sent) == 2, "the session compacted again: its archive may have grown"
