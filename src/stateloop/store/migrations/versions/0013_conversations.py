"""Conversations: threads of one agent that share its memory. A ``conversations`` table, and
``messages.conversation_id`` (NULL for the agent's default thread).

Revision ID: 0013
Revises: 0012
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0013"
down_revision = "0012"
branch_labels = None
depends_on = None

JSON = sa.JSON(none_as_null=True)


def upgrade() -> None:
    op.add_column("messages", sa.Column("conversation_id", sa.String))
    op.create_index("ix_messages_conversation_seq", "messages", ["conversation_id", "seq"])
    op.create_table(
        "conversations",
        sa.Column("id", sa.String, primary_key=True),
        sa.Column("agent_id", sa.String, sa.ForeignKey("agents.id", ondelete="CASCADE"),
                  nullable=False),
        sa.Column("summary", sa.Text),
        sa.Column("in_context_message_ids", JSON, nullable=False),
        sa.Column("in_context_after_seq", sa.Integer, nullable=False),
        sa.Column("pending_approval", JSON),
        sa.Column("isolated_block_ids", JSON, nullable=False),
        sa.Column("model", sa.String),
        sa.Column("model_settings", JSON),
        sa.Column("last_message_at", sa.Float),
        sa.Column("created_at", sa.Float, nullable=False),
        sa.Column("updated_at", sa.Float, nullable=False),
    )
    op.create_index("ix_conversations_agent", "conversations", ["agent_id", "created_at"])


def downgrade() -> None:
    op.execute("DELETE FROM messages WHERE conversation_id IS NOT NULL")
    op.drop_index("ix_conversations_agent", "conversations")
    op.drop_table("conversations")
    op.drop_index("ix_messages_conversation_seq", "messages")
    op.drop_column("messages", "conversation_id")
