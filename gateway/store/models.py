"""The store's tables, as SQLAlchemy 2 declarative models (the migrations create the same).

Three tables. ``blobs`` holds each distinct piece of content once (a message, a tool
list, an assistant answer), addressed by the sha256 of its canonical JSON.
``message_nodes`` holds ordered message lists as hash chains: a node is (parent list,
one message), so a request names its whole message list with one hash and a turn adds
only the nodes of its new messages. ``requests`` has one row per chat request with the
heads of its original and assembled lists, parameters, decisions and outcome.

Why a chain and not a JSON array of hashes per request: an agent resends its history
every turn, so arrays would grow with the square of the session length (a 200-message
session stores 20,000 hashes), which is the growth the store exists to avoid.

No foreign keys between the three: content is shared, written in any order by several
processes, and swept by ``retention`` with one reachability query.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import JSON, Boolean, Float, Index, Integer, LargeBinary, String, Text, UniqueConstraint
from sqlalchemy import false as sa_false
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

HASH = 64
JsonType = JSON().with_variant(JSONB(), "postgresql")


class Base(DeclarativeBase):
    pass


class Blob(Base):
    """One distinct piece of content; ``content`` is its canonical JSON."""

    __tablename__ = "blobs"

    hash: Mapped[str] = mapped_column(String(HASH), primary_key=True)
    kind: Mapped[str] = mapped_column(String(16))  # message | tools | answer
    size: Mapped[int] = mapped_column(Integer)
    content: Mapped[str] = mapped_column(Text)
    created_at: Mapped[float] = mapped_column(Float)


class MessageNode(Base):
    """An ordered message list: the list ``parent`` (``""`` for none) followed by ``message``."""

    __tablename__ = "message_nodes"

    hash: Mapped[str] = mapped_column(String(HASH), primary_key=True)
    parent: Mapped[str] = mapped_column(String(HASH))
    message: Mapped[str] = mapped_column(String(HASH))
    depth: Mapped[int] = mapped_column(Integer)


class Request(Base):
    """One chat request: what the client sent, what the model saw, what came back."""

    __tablename__ = "requests"
    __table_args__ = (Index("ix_requests_session_created", "session_id", "created_at"),)

    request_id: Mapped[str] = mapped_column(String(64), primary_key=True)
    session_id: Mapped[str] = mapped_column(String(128))
    created_at: Mapped[float] = mapped_column(Float, index=True)  # unix seconds
    model: Mapped[str] = mapped_column(String(128))
    provider: Mapped[str] = mapped_column(String(64))
    caller: Mapped[str] = mapped_column(String(64))  # short hash of the key, never the key
    stream: Mapped[bool] = mapped_column(Boolean, default=False)
    turn: Mapped[int] = mapped_column(Integer, default=0)
    replay_of: Mapped[str | None] = mapped_column(String(64), nullable=True)
    status: Mapped[int] = mapped_column(Integer)
    error: Mapped[str | None] = mapped_column(Text, nullable=True)

    original_head: Mapped[str] = mapped_column(String(HASH))
    original_count: Mapped[int] = mapped_column(Integer)
    original_tools: Mapped[str | None] = mapped_column(String(HASH), nullable=True)
    original_params: Mapped[dict[str, Any]] = mapped_column(JsonType)
    assembled_head: Mapped[str] = mapped_column(String(HASH))
    assembled_count: Mapped[int] = mapped_column(Integer)
    assembled_tools: Mapped[str | None] = mapped_column(String(HASH), nullable=True)
    assembled_params: Mapped[dict[str, Any]] = mapped_column(JsonType)
    decisions: Mapped[list[dict[str, Any]]] = mapped_column(JsonType)

    answer: Mapped[str | None] = mapped_column(String(HASH), nullable=True)  # blob of the assistant message
    response_meta: Mapped[dict[str, Any] | None] = mapped_column(JsonType, nullable=True)
    finish_reason: Mapped[str | None] = mapped_column(String(32), nullable=True)

    prompt_tokens: Mapped[int] = mapped_column(Integer, default=0)
    completion_tokens: Mapped[int] = mapped_column(Integer, default=0)
    cached_tokens: Mapped[int] = mapped_column(Integer, default=0)
    cache_write_tokens: Mapped[int] = mapped_column(Integer, default=0)
    #: What a local engine (llama.cpp ``timings``) evaluated and reused of the prompt; NULL when not reported.
    evaluated_tokens: Mapped[int | None] = mapped_column(Integer, nullable=True)
    reused_tokens: Mapped[int | None] = mapped_column(Integer, nullable=True)
    tokens_original: Mapped[int] = mapped_column(Integer, default=0)
    tokens_assembled: Mapped[int] = mapped_column(Integer, default=0)
    overhead_ms: Mapped[float] = mapped_column(Float, default=0.0)
    ttfb_ms: Mapped[float | None] = mapped_column(Float, nullable=True)
    total_ms: Mapped[float] = mapped_column(Float, default=0.0)
    budget: Mapped[dict[str, Any] | None] = mapped_column(JsonType, nullable=True)
    # Revision 0006: the front door, and figures derived once from the decisions as they went out
    route: Mapped[str] = mapped_column(String(16), default="chat", server_default="chat")
    compactions: Mapped[int] = mapped_column(Integer, default=0, server_default="0")  # not undone ones
    reverted: Mapped[bool] = mapped_column(Boolean, default=False, server_default=sa_false())
    upstream_calls: Mapped[int] = mapped_column(Integer, default=1, server_default="1")
    # Revision 0010: the client's own labels (store/client_tags.py)
    client_user: Mapped[str | None] = mapped_column(String(256), nullable=True)
    tags: Mapped[str | None] = mapped_column(String(1024), nullable=True)
    # The summariser's share of the billed usage above and its model (``summariser_share.py``): priced at its prices
    summarizer_model: Mapped[str | None] = mapped_column(String(128), nullable=True)
    summarizer_prompt_tokens: Mapped[int] = mapped_column(Integer, default=0, server_default="0")
    summarizer_cached_tokens: Mapped[int] = mapped_column(Integer, default=0, server_default="0")
    summarizer_completion_tokens: Mapped[int] = mapped_column(Integer, default=0, server_default="0")


class SessionStateRow(Base):
    """One conversation's assembly state, shared by every replica (``sessions/shared.py``)."""

    __tablename__ = "session_states"

    session_id: Mapped[str] = mapped_column(String(128), primary_key=True)
    state: Mapped[str] = mapped_column(Text)  # SessionState.to_dict() as JSON
    updated_at: Mapped[float] = mapped_column(Float, index=True)
    #: Bumped by every save; a save names the version it read (compare-and-set, ``sessions/merge.py``).
    version: Mapped[int] = mapped_column(Integer, default=1, server_default="1")


class SessionClaim(Base):
    """First writer wins: the replica whose insert succeeds does the claimed work (e.g. one summary)."""

    __tablename__ = "session_claims"

    claim_key: Mapped[str] = mapped_column(String(256), primary_key=True)
    owner: Mapped[str] = mapped_column(String(64))
    created_at: Mapped[float] = mapped_column(Float, index=True)
    result: Mapped[str | None] = mapped_column(Text, nullable=True)  # the winner's finished work, append-only


class StoredResponseRow(Base):
    """One stored Responses API response (``store/responses.py``): its own input items and its
    Response object; a chain is rebuilt by following ``previous_id``."""

    __tablename__ = "responses"

    response_id: Mapped[str] = mapped_column(String(64), primary_key=True)
    caller: Mapped[str] = mapped_column(String(64))
    previous_id: Mapped[str | None] = mapped_column(String(64), nullable=True)
    session_id: Mapped[str] = mapped_column(String(128))
    created_at: Mapped[float] = mapped_column(Float, index=True)
    items: Mapped[str] = mapped_column(Text)  # JSON array of input items
    response: Mapped[str] = mapped_column(Text)  # JSON Response object


class MemoryPassage(Base):
    """A verbatim excerpt of history that compaction replaced, kept for recall (``memory/archive.py``).

    ``start``/``end`` index the client's original messages (end exclusive), ``turn_start``/
    ``turn_end`` count its user turns (1-based); ``part`` numbers the pieces of a long turn.
    ``terms`` is the passage's lexical index (its BM25 terms, space-separated); ``vector`` its
    MiniLM embedding (float16 bytes, ``memory/vectors.py``), absent when the encoder is not installed;
    ``dated`` the newest short dated message at or before it ("[new session, 2024-01-12]"), if any.
    """

    __tablename__ = "memory_passages"
    __table_args__ = (UniqueConstraint("session_id", "start", "part", name="uq_memory_passages_position"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    session_id: Mapped[str] = mapped_column(String(128), index=True)
    owner: Mapped[str] = mapped_column(String(160), index=True)  # user:<user field> or caller:<key hash>
    start: Mapped[int] = mapped_column(Integer)
    end: Mapped[int] = mapped_column(Integer)
    part: Mapped[int] = mapped_column(Integer, default=0)
    turn_start: Mapped[int] = mapped_column(Integer)
    turn_end: Mapped[int] = mapped_column(Integer)
    text: Mapped[str] = mapped_column(Text)
    terms: Mapped[str] = mapped_column(Text)
    vector: Mapped[bytes | None] = mapped_column(LargeBinary, nullable=True, default=None)
    dated: Mapped[str | None] = mapped_column(String(80), nullable=True, default=None)
    created_at: Mapped[float] = mapped_column(Float)


class MemoryFact(Base):
    """A long-term fact a user stated: one row per (owner, slot), updated when contradicted."""

    __tablename__ = "memory_facts"
    __table_args__ = (UniqueConstraint("owner", "slot", name="uq_memory_facts_owner_slot"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    owner: Mapped[str] = mapped_column(String(160), index=True)
    slot: Mapped[str] = mapped_column(String(128))
    text: Mapped[str] = mapped_column(Text)
    source_session: Mapped[str] = mapped_column(String(128))
    created_at: Mapped[float] = mapped_column(Float)
    updated_at: Mapped[float] = mapped_column(Float)


class ToolProfile(Base):
    """A tool's usage profile, shared by every worker and kept across restarts (``store/tool_profiles.py``).

    ``mean`` is the running mean of the embeddings of the turns after which the model called the
    tool (float32 bytes, ``dim`` of them), from the encoder ``encoder``: a profile from another
    encoder is not comparable and is never read. ``version`` counts merges, so two workers merging
    into the same row at once cannot overwrite each other (the second retries).
    """

    __tablename__ = "tool_profiles"

    tool_key: Mapped[str] = mapped_column(String(256), primary_key=True)  # name#definition-hash
    encoder: Mapped[str] = mapped_column(String(64), primary_key=True)
    dim: Mapped[int] = mapped_column(Integer)
    mean: Mapped[bytes] = mapped_column(LargeBinary)
    examples: Mapped[int] = mapped_column(Integer)
    version: Mapped[int] = mapped_column(Integer)
    updated_at: Mapped[float] = mapped_column(Float, index=True)
