"""Agents remember how their last run ended (Letta's last_run_* and last_stop_reason).

Revision ID: 0002
Revises: 0001
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("agents", sa.Column("last_run_completion", sa.Float))
    op.add_column("agents", sa.Column("last_run_duration_ms", sa.Float))
    op.add_column("agents", sa.Column("last_stop_reason", sa.String))


def downgrade() -> None:
    with op.batch_alter_table("agents") as batch:
        batch.drop_column("last_stop_reason")
        batch.drop_column("last_run_duration_ms")
        batch.drop_column("last_run_completion")
