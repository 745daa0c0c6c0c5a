"""Concurrent turns of one session lose no update, in one process and across replicas.

A turn loads its session's state, assembles, and saves; ``find_tools`` grows the session's
tool set mid-request. Before saves were compare-and-set with a merge, the later save of the
whole state dropped what the other wrote: a turn that loaded before a search saved after it,
and the grown tool set was gone (the next turn pruned the tool away again).
"""

from __future__ import annotations

import asyncio
import random
from dataclasses import replace

from gateway.assembly.context import SessionState
from gateway.config import Settings
from gateway.edges.tool_search import ToolSearch
from gateway.sessions.memory import MemorySessionStore
from gateway.sessions.protocol import SessionStore
from gateway.sessions.shared import SharedSessionStore

TURNS = 24
SEARCHES = 12
SESSION = "caller/s-concurrent"


async def _turn(store: SessionStore, i: int, rng: random.Random) -> None:
    """What ``answer_chat`` does with the state: load, assemble (a while), save what it changed."""
    loaded = await store.load(SESSION)
    await asyncio.sleep(rng.uniform(0, 0.02))
    mine = replace(loaded, turn=loaded.turn + 1, previous_prefix=(f"p{i}",), extra={**loaded.extra, f"turn{i}": i})
    await store.save(mine, base=loaded)


async def _search(store: SessionStore, j: int, rng: random.Random) -> None:
    """A served ``find_tools`` call growing the session's set with one tool."""
    await asyncio.sleep(rng.uniform(0, 0.02))
    search = ToolSearch(
        client_tools=[],
        session_id=SESSION,
        sessions=store,
        policy=Settings().policy.tools,
        counter=None,  # type: ignore[arg-type]
    )
    await search._grow_session([f"tool{j}"])


async def _race(stores: list[SessionStore]) -> SessionState:
    rng = random.Random(7)
    jobs = [_turn(stores[i % len(stores)], i, rng) for i in range(TURNS)]
    jobs += [_search(stores[j % len(stores)], j, rng) for j in range(SEARCHES)]
    rng.shuffle(jobs)
    await asyncio.gather(*jobs)
    return await stores[0].load(SESSION)


def _assert_nothing_lost(state: SessionState) -> None:
    assert sorted(state.tool_set) == sorted(f"tool{j}" for j in range(SEARCHES)), "a find_tools growth was lost"
    assert {f"turn{i}" for i in range(TURNS)} <= set(state.extra), "a turn's own change was lost"
    assert state.turn >= 1


async def test_concurrent_turns_in_one_process_lose_no_update() -> None:
    _assert_nothing_lost(await _race([MemorySessionStore()]))


async def test_concurrent_turns_on_two_replicas_lose_no_update(database_url: str) -> None:
    """Two stores on one database (SQLite file or PostgreSQL): two replicas, or two workers."""
    a = SharedSessionStore(database_url, owner="a")
    b = SharedSessionStore(database_url, owner="b")
    try:
        state = await _race([a, b])
        _assert_nothing_lost(state)
        assert state == await b.load(SESSION)
    finally:
        await a.close()
        await b.close()
