"""Requests: the client's own labels, its ``user`` and its ``metadata`` tags, so lists can show and filter them.

Revision ID: 0010_client_tags
Revises: 0009_memory
Create Date: 2026-12-03
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0010_client_tags"
down_revision = "0009_memory"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("requests") as batch:
        batch.add_column(sa.Column("client_user", sa.String(256), nullable=True))
        # ";key=value;key=value;" (sorted), so one tag matches as LIKE '%;key=value;%'
        batch.add_column(sa.Column("tags", sa.String(1024), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("requests") as batch:
        batch.drop_column("tags")
        batch.drop_column("client_user")
