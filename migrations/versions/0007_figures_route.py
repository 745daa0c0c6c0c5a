"""Requests: the front door (route) and figures derived from the decisions as they went out.

``compactions`` counts compactions that were not undone, ``reverted`` says the assembly was undone,
``upstream_calls`` counts every call a served-tool loop made; refused requests are stored too
(status >= 400 and empty bodies).

Revision ID: 0007_figures
Revises: 0006_engine_tokens
Create Date: 2026-12-03
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0007_figures"
down_revision = "0006_engine_tokens"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("requests") as batch:
        batch.add_column(sa.Column("route", sa.String(16), nullable=False, server_default="chat"))
        batch.add_column(sa.Column("compactions", sa.Integer(), nullable=False, server_default="0"))
        batch.add_column(sa.Column("reverted", sa.Boolean(), nullable=False, server_default=sa.false()))
        batch.add_column(sa.Column("upstream_calls", sa.Integer(), nullable=False, server_default="1"))


def downgrade() -> None:
    with op.batch_alter_table("requests") as batch:
        batch.drop_column("upstream_calls")
        batch.drop_column("reverted")
        batch.drop_column("compactions")
        batch.drop_column("route")
