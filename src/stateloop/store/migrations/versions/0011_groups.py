"""Multi-agent groups: the group, its members in order, its shared blocks, its messages.

Revision ID: 0011
Revises: 0010
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None

JSON = sa.JSON(none_as_null=True)


def upgrade() -> None:
    op.create_table(
        "groups",
        sa.Column("id", sa.String, primary_key=True),
        sa.Column("manager_type", sa.String, nullable=False),
        sa.Column("description", sa.Text, nullable=False),
        sa.Column("manager_agent_id", sa.String,
                  sa.ForeignKey("agents.id", ondelete="SET NULL")),
        sa.Column("max_turns", sa.Integer),
        sa.Column("termination_token", sa.String),
        sa.Column("sleeptime_agent_frequency", sa.Integer),
        sa.Column("turns_counter", sa.Integer),
        sa.Column("last_processed_message_id", sa.String),
        sa.Column("hidden", sa.Boolean),
        sa.Column("project_id", sa.String),
        sa.Column("metadata", JSON, nullable=False),
        sa.Column("cursors", JSON, nullable=False),
        sa.Column("created_at", sa.Float, nullable=False),
        sa.Column("updated_at", sa.Float, nullable=False),
    )
    op.create_table(
        "group_members",
        sa.Column("group_id", sa.String, sa.ForeignKey("groups.id", ondelete="CASCADE"),
                  primary_key=True),
        sa.Column("agent_id", sa.String, sa.ForeignKey("agents.id", ondelete="CASCADE"),
                  primary_key=True),
        sa.Column("position", sa.Integer, nullable=False),
    )
    op.create_index("ix_group_members_agent", "group_members", ["agent_id"])
    op.create_table(
        "group_blocks",
        sa.Column("group_id", sa.String, sa.ForeignKey("groups.id", ondelete="CASCADE"),
                  primary_key=True),
        sa.Column("block_id", sa.String, sa.ForeignKey("blocks.id", ondelete="CASCADE"),
                  primary_key=True),
    )
    op.create_index("ix_group_blocks_block", "group_blocks", ["block_id"])
    op.create_table(
        "group_messages",
        sa.Column("seq", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("id", sa.String, nullable=False, unique=True),
        sa.Column("group_id", sa.String, sa.ForeignKey("groups.id", ondelete="CASCADE"),
                  nullable=False),
        sa.Column("role", sa.String, nullable=False),
        sa.Column("text", sa.Text, nullable=False),
        sa.Column("sender_id", sa.String),
        sa.Column("name", sa.String),
        sa.Column("run_id", sa.String),
        sa.Column("created_at", sa.Float, nullable=False),
        sqlite_autoincrement=True,
    )
    op.create_index("ix_group_messages_group_seq", "group_messages", ["group_id", "seq"])


def downgrade() -> None:
    for index, table in (("ix_group_messages_group_seq", "group_messages"),
                         ("ix_group_blocks_block", "group_blocks"),
                         ("ix_group_members_agent", "group_members")):
        op.drop_index(index, table_name=table)
    for table in ("group_messages", "group_blocks", "group_members", "groups"):
        op.drop_table(table)
