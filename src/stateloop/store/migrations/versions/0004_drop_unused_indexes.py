"""Drop two indexes no query uses; each cost every step's write a B-tree insert.

Revision ID: 0004
Revises: 0003
"""

from __future__ import annotations

from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.drop_index("ix_messages_run", table_name="messages")
    op.drop_index("ix_steps_agent", table_name="steps")


def downgrade() -> None:
    op.create_index("ix_steps_agent", "steps", ["agent_id"])
    op.create_index("ix_messages_run", "messages", ["run_id"])
