"""Memory: archived passages of compacted history and long-term user facts.

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-29
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "memory_passages",
        sa.Column("id", sa.Integer(), primary_key=True, autoincrement=True),
        sa.Column("session_id", sa.String(128), nullable=False),
        sa.Column("owner", sa.String(160), nullable=False),
        sa.Column("start", sa.Integer(), nullable=False),
        sa.Column("end", sa.Integer(), nullable=False),
        sa.Column("part", sa.Integer(), nullable=False),
        sa.Column("turn_start", sa.Integer(), nullable=False),
        sa.Column("turn_end", sa.Integer(), nullable=False),
        sa.Column("text", sa.Text(), nullable=False),
        sa.Column("terms", sa.Text(), nullable=False),
        sa.Column("created_at", sa.Float(), nullable=False),
        sa.UniqueConstraint("session_id", "start", "part", name="uq_memory_passages_position"),
    )
    op.create_index("ix_memory_passages_session_id", "memory_passages", ["session_id"])
    op.create_index("ix_memory_passages_owner", "memory_passages", ["owner"])
    op.create_table(
        "memory_facts",
        sa.Column("id", sa.Integer(), primary_key=True, autoincrement=True),
        sa.Column("owner", sa.String(160), nullable=False),
        sa.Column("slot", sa.String(128), nullable=False),
        sa.Column("text", sa.Text(), nullable=False),
        sa.Column("source_session", sa.String(128), nullable=False),
        sa.Column("created_at", sa.Float(), nullable=False),
        sa.Column("updated_at", sa.Float(), nullable=False),
        sa.UniqueConstraint("owner", "slot", name="uq_memory_facts_owner_slot"),
    )
    op.create_index("ix_memory_facts_owner", "memory_facts", ["owner"])


def downgrade() -> None:
    op.drop_index("ix_memory_facts_owner", "memory_facts")
    op.drop_table("memory_facts")
    op.drop_index("ix_memory_passages_owner", "memory_passages")
    op.drop_index("ix_memory_passages_session_id", "memory_passages")
    op.drop_table("memory_passages")
