"""Recall ranks by meaning too: each archived passage keeps its MiniLM embedding and its date.

Revision ID: 0009_memory
Revises: 0008_session_version
Create Date: 2026-12-03
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0009_memory"
down_revision = "0008_session_version"
branch_labels = None
depends_on = None


def upgrade() -> None:
    # nullable: rows archived before, or by a gateway without the encoder, rank by BM25 alone
    op.add_column("memory_passages", sa.Column("vector", sa.LargeBinary(), nullable=True))
    # when it was said, as the conversation dated it ("[new session, 2024-01-12]"): time questions need it
    op.add_column("memory_passages", sa.Column("dated", sa.String(80), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("memory_passages") as batch:
        batch.drop_column("dated")
        batch.drop_column("vector")
