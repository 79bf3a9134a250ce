"""Scheduled messages: a message sent to an agent at a time or on a cron schedule, one row
each with when it is next due, deleted with its agent.

Revision ID: 0029
Revises: 0028
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0029"
down_revision = "0028"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "scheduled_messages",
        sa.Column("id", sa.String, primary_key=True),
        sa.Column("agent_id", sa.String, sa.ForeignKey("agents.id", ondelete="CASCADE"),
                  nullable=False),
        sa.Column("request", sa.JSON, nullable=False),
        sa.Column("schedule", sa.JSON, nullable=False),
        sa.Column("next_at", sa.Float),
        sa.Column("fired_count", sa.Integer, nullable=False),
        sa.Column("last_fired_at", sa.Float),
        sa.Column("last_run_id", sa.String),
        sa.Column("claimed_by", sa.String),
        sa.Column("claimed_for", sa.Float),
        sa.Column("created_at", sa.Float, nullable=False),
    )
    op.create_index("ix_scheduled_messages_due", "scheduled_messages", ["next_at"])
    op.create_index("ix_scheduled_messages_agent", "scheduled_messages",
                    ["agent_id", "created_at", "id"])


def downgrade() -> None:
    op.drop_index("ix_scheduled_messages_agent", "scheduled_messages")
    op.drop_index("ix_scheduled_messages_due", "scheduled_messages")
    op.drop_table("scheduled_messages")
