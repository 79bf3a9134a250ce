"""Message batches: a batch of requests to many agents, one row per request with its status,
the process running it and the run it started.

Revision ID: 0030
Revises: 0029
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0030"
down_revision = "0029"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "message_batches",
        sa.Column("id", sa.String, primary_key=True),
        sa.Column("status", sa.String, nullable=False),
        sa.Column("callback_url", sa.String),
        sa.Column("callback", sa.JSON),
        sa.Column("callback_owner", sa.String),
        sa.Column("created_at", sa.Float, nullable=False),
        sa.Column("updated_at", sa.Float, nullable=False),
        sa.Column("completed_at", sa.Float),
    )
    op.create_index("ix_message_batches_created", "message_batches", ["created_at", "id"])
    op.create_index("ix_message_batches_status", "message_batches",
                    ["status", "created_at", "id"])
    op.create_table(
        "batch_requests",
        sa.Column("id", sa.String, primary_key=True),
        sa.Column("batch_id", sa.String,
                  sa.ForeignKey("message_batches.id", ondelete="CASCADE"), nullable=False),
        sa.Column("position", sa.Integer, nullable=False),
        sa.Column("agent_id", sa.String, nullable=False),
        sa.Column("request", sa.JSON, nullable=False),
        sa.Column("status", sa.String, nullable=False),
        sa.Column("claimed_by", sa.String),
        sa.Column("run_id", sa.String),
        sa.Column("stop_reason", sa.String),
        sa.Column("error", sa.Text),
        sa.Column("started_at", sa.Float),
        sa.Column("completed_at", sa.Float),
    )
    op.create_index("ix_batch_requests_batch", "batch_requests",
                    ["batch_id", "status", "position"])
    op.create_index("ix_batch_requests_status", "batch_requests", ["status", "batch_id"])


def downgrade() -> None:
    op.drop_index("ix_batch_requests_status", "batch_requests")
    op.drop_index("ix_batch_requests_batch", "batch_requests")
    op.drop_table("batch_requests")
    op.drop_index("ix_message_batches_status", "message_batches")
    op.drop_index("ix_message_batches_created", "message_batches")
    op.drop_table("message_batches")
