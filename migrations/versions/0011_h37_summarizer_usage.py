"""Requests: the summariser's share of the billed usage and its model, so it is priced at that model's prices.

Revision ID: 0011_h37_summarizer_usage
Revises: 0010_client_tags
Create Date: 2026-12-03
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0011_h37_summarizer_usage"
down_revision = "0010_client_tags"
branch_labels = None
depends_on = None


def upgrade() -> None:
    # Rows written before this revision keep 0: their summariser tokens stay priced at the request's model.
    with op.batch_alter_table("requests") as batch:
        batch.add_column(sa.Column("summarizer_model", sa.String(128), nullable=True))
        batch.add_column(sa.Column("summarizer_prompt_tokens", sa.Integer(), nullable=False, server_default="0"))
        batch.add_column(sa.Column("summarizer_cached_tokens", sa.Integer(), nullable=False, server_default="0"))
        batch.add_column(sa.Column("summarizer_completion_tokens", sa.Integer(), nullable=False, server_default="0"))


def downgrade() -> None:
    with op.batch_alter_table("requests") as batch:
        batch.drop_column("summarizer_completion_tokens")
        batch.drop_column("summarizer_cached_tokens")
        batch.drop_column("summarizer_prompt_tokens")
        batch.drop_column("summarizer_model")
