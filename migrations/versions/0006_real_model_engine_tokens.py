"""What a local engine evaluated and reused of each prompt (llama.cpp ``timings``).

Revision ID: 0006_engine_tokens
Revises: 0005_responses
Create Date: 2026-12-03
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0006_engine_tokens"
down_revision = "0005_responses"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("requests") as batch:
        batch.add_column(sa.Column("evaluated_tokens", sa.Integer(), nullable=True))
        batch.add_column(sa.Column("reused_tokens", sa.Integer(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("requests") as batch:
        batch.drop_column("reused_tokens")
        batch.drop_column("evaluated_tokens")
