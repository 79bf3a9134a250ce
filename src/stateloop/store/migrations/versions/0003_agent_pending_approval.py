"""Agents keep a step paused for approval, so another process can resume it.

Revision ID: 0003
Revises: 0002
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("agents", sa.Column("pending_approval", sa.JSON))


def downgrade() -> None:
    with op.batch_alter_table("agents") as batch:
        batch.drop_column("pending_approval")
