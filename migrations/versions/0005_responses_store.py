"""Stored Responses API responses: previous_response_id, GET/DELETE and input_items read them.

Revision ID: 0005_responses
Revises: 0004
Create Date: 2026-12-02
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0005_responses"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "responses",
        sa.Column("response_id", sa.String(64), nullable=False),
        sa.Column("caller", sa.String(64), nullable=False),
        sa.Column("previous_id", sa.String(64), nullable=True),
        sa.Column("session_id", sa.String(128), nullable=False),
        sa.Column("created_at", sa.Float(), nullable=False),
        sa.Column("items", sa.Text(), nullable=False),
        sa.Column("response", sa.Text(), nullable=False),
        sa.PrimaryKeyConstraint("response_id"),
    )
    op.create_index("ix_responses_created_at", "responses", ["created_at"])


def downgrade() -> None:
    op.drop_index("ix_responses_created_at", "responses")
    op.drop_table("responses")
