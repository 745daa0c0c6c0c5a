"""The context store: content-addressed blobs, message chains, one row per request.

Revision ID: 0001
Revises:
Create Date: 2026-11-29
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None

JSON = sa.JSON().with_variant(postgresql.JSONB(), "postgresql")


def upgrade() -> None:
    op.create_table(
        "blobs",
        sa.Column("hash", sa.String(64), primary_key=True),
        sa.Column("kind", sa.String(16), nullable=False),
        sa.Column("size", sa.Integer(), nullable=False),
        sa.Column("content", sa.Text(), nullable=False),
        sa.Column("created_at", sa.Float(), nullable=False),
    )
    op.create_table(
        "message_nodes",
        sa.Column("hash", sa.String(64), primary_key=True),
        sa.Column("parent", sa.String(64), nullable=False),
        sa.Column("message", sa.String(64), nullable=False),
        sa.Column("depth", sa.Integer(), nullable=False),
    )
    op.create_table(
        "requests",
        sa.Column("request_id", sa.String(64), primary_key=True),
        sa.Column("session_id", sa.String(128), nullable=False),
        sa.Column("created_at", sa.Float(), nullable=False),
        sa.Column("model", sa.String(128), nullable=False),
        sa.Column("provider", sa.String(64), nullable=False),
        sa.Column("caller", sa.String(64), nullable=False),
        sa.Column("stream", sa.Boolean(), nullable=False),
        sa.Column("turn", sa.Integer(), nullable=False),
        sa.Column("replay_of", sa.String(64), nullable=True),
        sa.Column("status", sa.Integer(), nullable=False),
        sa.Column("error", sa.Text(), nullable=True),
        sa.Column("original_head", sa.String(64), nullable=False),
        sa.Column("original_count", sa.Integer(), nullable=False),
        sa.Column("original_tools", sa.String(64), nullable=True),
        sa.Column("original_params", JSON, nullable=False),
        sa.Column("assembled_head", sa.String(64), nullable=False),
        sa.Column("assembled_count", sa.Integer(), nullable=False),
        sa.Column("assembled_tools", sa.String(64), nullable=True),
        sa.Column("assembled_params", JSON, nullable=False),
        sa.Column("decisions", JSON, nullable=False),
        sa.Column("answer", sa.String(64), nullable=True),
        sa.Column("response_meta", JSON, nullable=True),
        sa.Column("finish_reason", sa.String(32), nullable=True),
        sa.Column("prompt_tokens", sa.Integer(), nullable=False),
        sa.Column("completion_tokens", sa.Integer(), nullable=False),
        sa.Column("cached_tokens", sa.Integer(), nullable=False),
        sa.Column("cache_write_tokens", sa.Integer(), nullable=False),
        sa.Column("tokens_original", sa.Integer(), nullable=False),
        sa.Column("tokens_assembled", sa.Integer(), nullable=False),
        sa.Column("overhead_ms", sa.Float(), nullable=False),
        sa.Column("ttfb_ms", sa.Float(), nullable=True),
        sa.Column("total_ms", sa.Float(), nullable=False),
        sa.Column("budget", JSON, nullable=True),
    )
    op.create_index("ix_requests_created_at", "requests", ["created_at"])
    op.create_index("ix_requests_session_created", "requests", ["session_id", "created_at"])


def downgrade() -> None:
    op.drop_index("ix_requests_session_created", table_name="requests")
    op.drop_index("ix_requests_created_at", table_name="requests")
    op.drop_table("requests")
    op.drop_table("message_nodes")
    op.drop_table("blobs")
