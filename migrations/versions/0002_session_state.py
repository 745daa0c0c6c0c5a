"""Shared session state and claims, so several gateway replicas behave as one.

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-29
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "session_states",
        sa.Column("session_id", sa.String(128), primary_key=True),
        sa.Column("state", sa.Text(), nullable=False),
        sa.Column("updated_at", sa.Float(), nullable=False),
    )
    op.create_index("ix_session_states_updated_at", "session_states", ["updated_at"])
    op.create_table(
        "session_claims",
        sa.Column("claim_key", sa.String(256), primary_key=True),
        sa.Column("owner", sa.String(64), nullable=False),
        sa.Column("created_at", sa.Float(), nullable=False),
        # What the winner produced (e.g. a finished checkpoint as JSON); NULL while in flight.
        # Finished work is stored append-only here, not in the last-writer-wins session state.
        sa.Column("result", sa.Text(), nullable=True),
    )
    op.create_index("ix_session_claims_created_at", "session_claims", ["created_at"])


def downgrade() -> None:
    op.drop_index("ix_session_claims_created_at", "session_claims")
    op.drop_table("session_claims")
    op.drop_index("ix_session_states_updated_at", "session_states")
    op.drop_table("session_states")
