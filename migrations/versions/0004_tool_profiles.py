"""Tool usage profiles: what users said before the model called each tool, kept across restarts.

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-30
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "tool_profiles",
        sa.Column("tool_key", sa.String(256), nullable=False),
        sa.Column("encoder", sa.String(64), nullable=False),
        sa.Column("dim", sa.Integer(), nullable=False),
        sa.Column("mean", sa.LargeBinary(), nullable=False),
        sa.Column("examples", sa.Integer(), nullable=False),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.Column("updated_at", sa.Float(), nullable=False),
        sa.PrimaryKeyConstraint("tool_key", "encoder"),
    )
    op.create_index("ix_tool_profiles_updated_at", "tool_profiles", ["updated_at"])


def downgrade() -> None:
    op.drop_index("ix_tool_profiles_updated_at", "tool_profiles")
    op.drop_table("tool_profiles")
