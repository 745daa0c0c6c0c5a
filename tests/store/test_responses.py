"""Stored Responses, in memory and in SQL (SQLite and PostgreSQL): chains, caller scoping, deletion."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import pytest

from gateway.store.migrate import upgrade
from gateway.store.responses import (
    MemoryResponseStore,
    ResponseStore,
    SqlResponseStore,
    StoredResponse,
    conversation,
)
from tests.store.databases import postgres_database


def _stored(rid: str, previous: str | None, caller: str = "alice", text: str = "") -> StoredResponse:
    output = [{"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": f"re {text}"}]}]
    return StoredResponse(
        response_id=rid,
        caller=caller,
        previous_id=previous,
        session_id="s-1",
        created_at=1.0,
        items=({"type": "message", "role": "user", "content": text, "id": f"msg_{rid}"},),
        response={"id": rid, "object": "response", "output": output},
    )


@pytest.fixture(params=["memory", "sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[ResponseStore]:
    if request.param == "memory":
        yield MemoryResponseStore()
        return
    with ExitStack() as stack:
        url = (
            f"sqlite:///{tmp_path / 'store.db'}"
            if request.param == "sqlite"
            else stack.enter_context(postgres_database())
        )
        upgrade(url)
        found = SqlResponseStore(url)
        yield found
        await found.close()


async def test_chain_rebuilds_the_conversation_oldest_first(store: ResponseStore) -> None:
    await store.put(_stored("resp_1", None, text="one"))
    await store.put(_stored("resp_2", "resp_1", text="two"))
    await store.put(_stored("resp_3", "resp_2", text="three"))
    chain = await store.chain("resp_3", "alice")
    assert [s.response_id for s in chain] == ["resp_1", "resp_2", "resp_3"]
    texts: list[Any] = [i["content"] if i["role"] == "user" else i["content"][0]["text"] for i in conversation(chain)]
    assert texts == ["one", "re one", "two", "re two", "three", "re three"]
    assert (await store.get("resp_2", "alice")) == chain[1]


async def test_another_caller_sees_nothing_and_chains_never_cross_callers(store: ResponseStore) -> None:
    await store.put(_stored("resp_a", None, caller="alice"))
    await store.put(_stored("resp_b", "resp_a", caller="bob"))
    assert await store.get("resp_a", "bob") is None
    assert await store.chain("resp_a", "bob") == []
    assert [s.response_id for s in await store.chain("resp_b", "bob")] == ["resp_b"]
    assert await store.delete("resp_a", "bob") is False
    assert await store.delete("resp_a", "alice") is True
    assert await store.get("resp_a", "alice") is None


async def test_memory_store_forgets_the_oldest_past_its_limit() -> None:
    small = MemoryResponseStore(limit=2)
    for i in range(3):
        await small.put(_stored(f"resp_{i}", None))
    assert await small.get("resp_0", "alice") is None
    assert await small.get("resp_2", "alice") is not None


async def test_memory_store_keeps_a_chain_in_use_whole() -> None:
    small = MemoryResponseStore(limit=3)
    await small.put(_stored("resp_root", None))
    await small.put(_stored("resp_other_1", None))
    await small.put(_stored("resp_next", "resp_root"))
    await small.put(_stored("resp_other_2", None))
    assert [s.response_id for s in await small.chain("resp_next", "alice")] == ["resp_root", "resp_next"]
    assert await small.get("resp_other_1", "alice") is None
