"""A version on each session state, so a save is a compare-and-set (no lost update across replicas).

Revision ID: 0008_session_version
Revises: 0007_figures
Create Date: 2026-12-03
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0008_session_version"
down_revision = "0007_figures"
branch_labels = None
depends_on = None


def upgrade() -> None:
    # Existing rows are version 1: a load that finds no row is version 0 (an insert, not an update).
    with op.batch_alter_table("session_states") as batch:
        batch.add_column(sa.Column("version", sa.Integer(), nullable=False, server_default="1"))


def downgrade() -> None:
    with op.batch_alter_table("session_states") as batch:
        batch.drop_column("version")
