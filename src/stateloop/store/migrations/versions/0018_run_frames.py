"""A run's stream frames in a table, so any server process can replay or follow them.

Revision ID: 0018
Revises: 0015
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0018"
down_revision = "0015"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "run_frames",
        sa.Column("run_id", sa.String, primary_key=True),
        sa.Column("seq_id", sa.Integer, primary_key=True),
        sa.Column("frame", sa.JSON(none_as_null=True)),
        sa.Column("created_at", sa.Float, nullable=False),
    )
    op.create_index("ix_run_frames_created", "run_frames", ["created_at"])


def downgrade() -> None:
    op.drop_table("run_frames")
